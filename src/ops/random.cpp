#include "ops/random.h"

#include <cmath>
#include <algorithm>
#include <limits>

#include "backend/kernels.h"
#include "ops/detail.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace t5x {
using namespace detail;

namespace {

// jax.random.uniform in f32: floats in [0, 1) scaled to [lo, hi) and clamped
// below at lo (all arithmetic in f32, as XLA does).
std::vector<float> uniform_f32(const PRNGKey& key, int64_t n, float lo, float hi) {
  std::vector<uint32_t> bits = random_bits(key, n);
  std::vector<float> out(static_cast<size_t>(n));
  kernels::cpu::uniform_from_bits(bits.data(), n, lo, hi, out.data());
  return out;
}

void check_float(const char* op, DType dt) {
  if (!is_floating(dt)) throw_invalid(op, std::string("dtype must be floating, got ") + dtype_name(dt));
}

}  // namespace

Array uniform(const PRNGKey& key, const Shape& shape, double minval, double maxval, DType dtype) {
  check_float("uniform", dtype);
  return Array::from_floats(shape, uniform_f32(key, shape.numel(), float(minval), float(maxval)), dtype);
}

Array normal(const PRNGKey& key, const Shape& shape, DType dtype) {
  check_float("normal", dtype);
  const float lo = std::nextafter(-1.0f, 0.0f);
  std::vector<float> u = uniform_f32(key, shape.numel(), lo, 1.0f);
  kernels::cpu::normal_from_uniform(u.data(), int64_t(u.size()));
  return Array::from_floats(shape, u, dtype);
}

Array truncated_normal(const PRNGKey& key, double lower, double upper, const Shape& shape, DType dtype) {
  check_float("truncated_normal", dtype);
  if (!(lower < upper))
    throw_invalid("truncated_normal", "needs lower < upper, got " + std::to_string(lower) + ", " + std::to_string(upper));
  const float sqrt2 = float(std::sqrt(2.0));
  const float lo = float(lower), hi = float(upper);
  const float a = std::erf(lo / sqrt2), b = std::erf(hi / sqrt2);
  std::vector<float> u = uniform_f32(key, shape.numel(), a, b);
  const float clip_lo = std::nextafter(lo, INFINITY), clip_hi = std::nextafter(hi, -INFINITY);
  kernels::cpu::truncated_normal_from_uniform(u.data(), int64_t(u.size()), clip_lo, clip_hi);
  return Array::from_floats(shape, u, dtype);
}

Array bernoulli(const PRNGKey& key, double p, const Shape& shape) {
  std::vector<float> u = uniform_f32(key, shape.numel(), 0.0f, 1.0f);
  const float pf = float(p);
  std::vector<int64_t> b(u.size());
  for (size_t i = 0; i < u.size(); ++i) b[i] = u[i] < pf;
  return Array::from_ints(shape, b, DType::boolean);
}

std::vector<float> categorical_noise_at(const PRNGKey& key, int64_t n, const std::vector<int64_t>& at) {
  std::vector<uint32_t> bits(at.size());
  random_bits_at(key, n, at.data(), int64_t(at.size()), bits.data());
  std::vector<float> u(at.size());
  kernels::cpu::uniform_from_bits(bits.data(), int64_t(bits.size()), std::numeric_limits<float>::min(), 1.0f, u.data());
  kernels::cpu::gumbel_from_uniform(u.data(), int64_t(u.size()));
  return u;
}

Array categorical(const PRNGKey& key, const Array& logits, const std::string& dim) {
  check_local("categorical", {logits});
  check_floating("categorical", logits, "logits");
  require_dim("categorical", logits, dim);
  // Gumbel noise -log(-log(u)), u uniform in [tiny, 1), over logits' shape.
  std::vector<float> u = uniform_f32(key, logits.size(), std::numeric_limits<float>::min(), 1.0f);
  kernels::cpu::gumbel_from_uniform(u.data(), int64_t(u.size()));
  Array g = Array::from_floats(logits.shape(), u, logits.dtype());
  return argmax(add(g, logits), dim);
}

Array dropout(const PRNGKey& key, const Array& x, double rate, const std::vector<std::string>& broadcast_dims) {
  if (rate < 0 || rate >= 1) throw_invalid("dropout", "rate must be in [0, 1), got " + std::to_string(rate));
  if (rate == 0) return x;
  check_floating("dropout", x);
  std::vector<Dim> md;
  for (const Dim& d : x.shape().dims())
    if (std::find(broadcast_dims.begin(), broadcast_dims.end(), d.name) == broadcast_dims.end()) md.push_back(d);
  for (const auto& n : broadcast_dims) require_dim("dropout", x, n);
  Array keep = bernoulli(key, 1.0 - rate, Shape(md));
  return where(keep, mul(x, 1.0 / (1.0 - rate)), 0.0);
}

}  // namespace t5x
