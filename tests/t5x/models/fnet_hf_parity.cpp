// Runs t5x.cpp's FNet encoder on the HF FNetModel written by fnet_hf_oracle.py
// and compares last_hidden_state and pooler_output with transformers' (f32).
//
//   t5x_fnet_hf_parity OUT_DIR [TOLERANCE=1e-4]
//
// Exit 0 when every element is within TOLERANCE (absolute); prints the worst
// differences either way.
#include <cmath>
#include <iostream>
#include <string>

#include "t5x/checkpoints/safetensors.h"
#include "t5x/models/fnet.h"

namespace {
using namespace t5x;

t5x::Array ids_array(const SafetensorsFile& f, const std::string& name) {
  const HostTensor* t = f.find(name);
  if (!t) throw std::runtime_error("expected.safetensors has no '" + name + "'");
  std::vector<int64_t> v;
  for (int32_t x : t->values<int32_t>()) v.push_back(x);
  return Array::from_ints(Shape{{"batch", t->shape[0]}, {"length", t->shape[1]}}, v);
}

double max_diff(const Array& got, const HostTensor* want, const char* what) {
  if (!want) throw std::runtime_error(std::string("expected.safetensors has no '") + what + "'");
  std::vector<float> a = got.to_floats(), b = want->values<float>();
  if (a.size() != b.size())
    throw std::runtime_error(std::string(what) + ": " + std::to_string(a.size()) + " values, transformers has " +
                             std::to_string(b.size()));
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);  // std::max(m, NaN) is m: a NaN output passed
    if (std::isnan(d)) break;
  }
  std::cout << what << " " << got.shape().to_string() << ": max |t5x.cpp - transformers| = " << m << "\n";
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: t5x_fnet_hf_parity OUT_DIR [TOLERANCE]\n";
    return 64;
  }
  try {
    const std::string out = argv[1];
    const double tol = argc == 3 ? std::stod(argv[2]) : 1e-4;
    FNetModelFiles m = load_hf_fnet(out + "/hf");
    SafetensorsFile want = read_safetensors(out + "/expected.safetensors");
    FNetOutputs o = fnet_encode(m.config, m.params, ids_array(want, "input_ids"), ids_array(want, "token_type_ids"));
    const double d1 = max_diff(o.last_hidden_state, want.find("last_hidden_state"), "last_hidden_state");
    const double d2 = max_diff(o.pooled, want.find("pooler_output"), "pooler_output");
    if (d1 > tol || d2 > tol) {
      std::cerr << "FAIL: difference above " << tol << "\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "t5x_fnet_hf_parity: " << e.what() << "\n";
    return 1;
  }
}
