// Writes a checkpoint with t5x.cpp for scripts/check/ckpt_python_reads.py:
//   t5x_ckpt_write_for_python OUT_MODEL_DIR OUT_EXPECTED_JSON
// Two simulated processes write disjoint halves of the partitioned arrays;
// float32, bfloat16 and int32 leaves, gzip / zstd / raw codecs, inline leaves.
#include <barrier>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/dtype_bf16.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"

using namespace t5x;

namespace {

HostTensor make(const std::string& dtype, std::vector<int64_t> shape, double scale) {
  HostTensor t = HostTensor::zeros(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = std::sin(double(i) * scale) * 10.0;
    if (dtype == "float32") { float f = float(v); std::memcpy(t.data.data() + 4 * i, &f, 4); }
    else if (dtype == "bfloat16") { uint16_t b = bfloat16::from_float(float(v)); std::memcpy(t.data.data() + 2 * i, &b, 2); }
    else if (dtype == "int32") { int32_t x = int32_t(std::lround(v * 100)); std::memcpy(t.data.data() + 4 * i, &x, 4); }
  }
  return t;
}

nlohmann::json describe(const HostTensor& t) {
  nlohmann::json vals = nlohmann::json::array();
  HostTensor f = t.dtype == "int32" ? t : cast_host_tensor(t, "float32");
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype == "int32") vals.push_back(f.values<int32_t>()[i]);
    else vals.push_back(double(f.values<float>()[i]));
  }
  return {{"dtype", t.dtype}, {"shape", t.shape}, {"values", vals}};
}

HostTensor rows(const HostTensor& t, int64_t r0, int64_t r1) {
  IndexBox b{{r0, 0}, {r1, t.shape[1]}};
  HostTensor o = HostTensor::zeros(t.dtype, b.extent());
  copy_box(t.data.data(), IndexBox::full(t.shape), o.data.data(), b, dtype_itemsize(t.dtype));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_MODEL_DIR OUT_EXPECTED_JSON\n", argv[0]);
    return 2;
  }
  const std::string model_dir = argv[1];
  fileio::remove_all(model_dir);
  fileio::make_dirs(model_dir);
  struct Arr { std::string path; HostTensor t; ZarrCompressor c; };
  std::vector<Arr> arrays = {
      {"target/encoder/layers_0/attention/query/kernel", make("float32", {8, 12}, 0.1), {"gzip", 1}},
      {"target/decoder/logits_dense/kernel", make("bfloat16", {8, 40}, 0.37), {"zstd", 1}},
      {"state/param_states/counts", make("int32", {6, 5}, 0.2), {}},
  };
  HostTensor step = HostTensor::from_values<int32_t>("int32", {}, {42});
  HostTensor v_row = make("float32", {8}, 0.5);
  HostTensor inline_bf16 = make("bfloat16", {3}, 1.0);
  std::barrier sync(2);
  std::vector<std::thread> procs;
  for (int p = 0; p < 2; ++p) {
    procs.emplace_back([&, p] {
      std::vector<SaveLeaf> leaves;
      for (const auto& a : arrays) {
        const int64_t half = a.t.shape[0] / 2;
        SaveLeaf l = SaveLeaf::sharded(a.path, rows(a.t, p * half, (p + 1) * half), a.t.shape,
                                       IndexBox{{p * half, 0}, {(p + 1) * half, a.t.shape[1]}});
        l.compressor = a.c;
        leaves.push_back(l);
      }
      leaves.push_back(SaveLeaf::inline_array("state/step", step));
      leaves.push_back(SaveLeaf::inline_array("state/param_states/encoder/v_row", v_row));
      leaves.push_back(SaveLeaf::inline_array("target/encoder/encoder_norm/scale", inline_bf16));
      SaveOptions opt;
      opt.process_index = p;
      opt.process_count = 2;
      opt.barrier = [&](const std::string&) { sync.arrive_and_wait(); };
      opt.timestamp = 1;
      opt.save_dtype = "";  // keep bf16 leaves bf16
      save_checkpoint(model_dir, 42, leaves, opt);
    });
  }
  for (auto& t : procs) t.join();
  nlohmann::json expected;
  expected["step"] = 42;
  for (const auto& a : arrays) expected["leaves"][a.path] = describe(a.t);
  expected["leaves"]["state/step"] = describe(step);
  expected["leaves"]["state/param_states/encoder/v_row"] = describe(v_row);
  expected["leaves"]["target/encoder/encoder_norm/scale"] = describe(inline_bf16);
  fileio::write_text(argv[2], expected.dump(1), false);
  std::printf("wrote %s/checkpoint_42\n", model_dir.c_str());
  return 0;
}
