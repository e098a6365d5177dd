// Every SIMD kernel gives the same bits on every target the CPU supports
// (AVX-512, AVX2, SSE4, SSSE3, the 128-bit emulation on this kind of x86-64
// machine; NEON and the emulation on aarch64), on lengths with and without
// tails and on special values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/binary.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cross_entropy.h"
#include "backend/cpu/gated_gelu.h"
#include "backend/cpu/rms_norm.h"
#include "backend/cpu/unary.h"
#include "backend/cpu/vec_math.h"
#include "backend/kernels.h"
#include "cross_target.h"
#include "test_util.h"

namespace t5x::cpu {
namespace {

using testing::append;
using testing::Bytes;
using testing::expect_same_on_every_target;
using testing::random_vec;

const int64_t kLengths[] = {1, 3, 15, 16, 17, 31, 33, 100, 1000, 40000};

// Random values over a wide range, with the special ones sprinkled in.
std::vector<float> inputs(int64_t n, uint32_t seed, float lo = -30.f, float hi = 30.f) {
  std::vector<float> x = random_vec(size_t(n), seed, lo, hi);
  const float special[] = {0.f, -0.f, 1e-40f, -1e-40f, 88.69f, -87.29f, 89.f, -88.f, 1e30f, -1e30f,
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < std::size(special) && i * 7 < x.size(); ++i) x[i * 7] = special[i];
  return x;
}

std::vector<bfloat16> to_bf16(const std::vector<float>& x) {
  std::vector<bfloat16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = bfloat16(x[i]);
  return y;
}

TEST(CrossTarget, ThereAreSeveralTargetsToCompare) {
  // Any x86-64 CPU runs at least the 128-bit emulation and SSSE3/SSE4, any
  // aarch64 one NEON and the emulation (src/backend/CMakeLists.txt); a build
  // that compiled one target only would make the tests below vacuous.
  EXPECT_GE(simd_targets().size(), 2u) << "targets: " << simd_target();
}

TEST(CrossTarget, Unary) {
  for (UnaryKernel op : {UnaryKernel::Exp, UnaryKernel::Tanh, UnaryKernel::Sigmoid, UnaryKernel::Gelu,
                         UnaryKernel::GeluGrad})
    for (int64_t n : kLengths) {
      const auto x = inputs(n, uint32_t(n));
      expect_same_on_every_target("unary " + std::to_string(int(op)) + " n=" + std::to_string(n), [&] {
        std::vector<float> y(x.size());
        unary_f32(op, x.data(), y.data(), n);
        Bytes b;
        append(b, y);
        return b;
      });
    }
}

TEST(CrossTarget, ScalarCallsEqualVectorLanes) {
  const auto x = inputs(1000, 7);
  std::vector<float> e(x.size()), t(x.size()), g(x.size());
  unary_f32(UnaryKernel::Exp, x.data(), e.data(), 1000);
  unary_f32(UnaryKernel::Tanh, x.data(), t.data(), 1000);
  unary_f32(UnaryKernel::Gelu, x.data(), g.data(), 1000);
  for (size_t i = 0; i < x.size(); ++i) {
    float fe = fast_exp(x[i]), ft = fast_tanh(x[i]), fg = gelu_tanh(x[i]);
    ASSERT_EQ(std::memcmp(&fe, &e[i], 4), 0) << x[i];
    ASSERT_EQ(std::memcmp(&ft, &t[i], 4), 0) << x[i];
    ASSERT_EQ(std::memcmp(&fg, &g[i], 4), 0) << x[i];
  }
}

TEST(CrossTarget, RowReductions) {
  for (int64_t n : kLengths) {
    const auto x = inputs(n, uint32_t(100 + n), -20.f, 20.f);
    std::vector<float> finite = x;
    for (float& v : finite)
      if (!std::isfinite(v) || std::fabs(v) > 80.f) v = 0.5f;
    expect_same_on_every_target("rows n=" + std::to_string(n), [&] {
      std::vector<float> y(static_cast<size_t>(n)), z(static_cast<size_t>(n));
      std::vector<float> sums = {exp_shift_sum(finite.data(), y.data(), n, 1.25f), exp_sum(finite.data(), n, -2.f),
                                 max_of(finite.data(), n), sum_of(finite.data(), n), max_of(x.data(), n)};
      exp_affine(finite.data(), z.data(), n, 0.5f, 1.5f, -0.25f);
      Bytes b;
      append(b, y);
      append(b, z);
      append(b, sums);
      return b;
    });
  }
}

TEST(CrossTarget, GatedGelu) {
  for (int64_t n : kLengths) {
    const auto h0 = inputs(n, uint32_t(n), -6.f, 6.f), h1 = random_vec(size_t(n), uint32_t(n + 1)),
               g = random_vec(size_t(n), uint32_t(n + 2));
    const auto h0b = to_bf16(h0), h1b = to_bf16(h1), gb = to_bf16(g);
    expect_same_on_every_target("gated_gelu n=" + std::to_string(n), [&] {
      std::vector<float> out(static_cast<size_t>(n)), d0(static_cast<size_t>(n)), d1(static_cast<size_t>(n));
      std::vector<bfloat16> outb(static_cast<size_t>(n)), d0b(static_cast<size_t>(n)), d1b(static_cast<size_t>(n));
      gated_gelu_forward(n, h0.data(), h1.data(), out.data());
      gated_gelu_backward(n, h0.data(), h1.data(), g.data(), d0.data(), d1.data());
      gated_gelu_forward_bf16(n, h0b.data(), h1b.data(), outb.data());
      gated_gelu_backward_bf16(n, h0b.data(), h1b.data(), gb.data(), d0b.data(), d1b.data());
      Bytes b;
      append(b, out), append(b, d0), append(b, d1), append(b, outb), append(b, d0b), append(b, d1b);
      return b;
    });
  }
}

// Adafactor's fused update (backend/cpu/adafactor.cpp): every flag
// combination, both factor orientations, batch dims, rows longer than one
// 512-value sum block, lengths off the 8-lane grid, more than one 32-row
// chunk, and a NaN gradient (kept out by skip_nan), over three steps.
TEST(CrossTarget, AdafactorUpdate) {
  struct Case {
    int64_t nb, outer, inner;
  };
  for (const Case c : {Case{1, 7, 13}, Case{2, 45, 517}, Case{1, 70, 1030}, Case{3, 1, 9}})
    for (int flags = 0; flags < 16; ++flags) {
      kernels::AdafactorScalars s;
      s.decay = 0.8f, s.mixing = 0.2f, s.eps1 = 1e-30f, s.eps2 = 1e-3f, s.lr = 0.01f;
      s.use_scale = flags & 1, s.clip = flags & 2, s.clipping_threshold = 0.5f;
      s.skip_nan = flags & 8, s.has_max_parameter_scale = flags & 8, s.max_parameter_scale = 0.3f;
      s.b1 = 0.9f, s.one_minus_b1 = 0.1f, s.keep_w = (flags & 4) ? 0.999f : 1.0f, s.grad_scale = (flags & 2) ? 0.5f : 1.f;
      const bool momentum = flags & 4;
      const int64_t n = c.nb * c.outer * c.inner;
      const std::string what = "adafactor " + std::to_string(c.nb) + "x" + std::to_string(c.outer) + "x" +
                               std::to_string(c.inner) + " flags=" + std::to_string(flags);
      expect_same_on_every_target(what, [&] {
        Bytes b;
        for (bool row_outer : {true, false}) {
          kernels::FactoredLayout l;
          l.nb = c.nb, l.n_outer = c.outer, l.n_inner = c.inner, l.row_outer = row_outer;
          const int64_t rows = row_outer ? c.outer : c.inner, cols = row_outer ? c.inner : c.outer;
          std::vector<float> p = random_vec(size_t(n), 1, -0.5f, 0.5f), m(size_t(n), 0.f), v(size_t(n), 0.f);
          std::vector<float> p2 = p, m2 = m, vr(size_t(c.nb * rows), 0.f), vc(size_t(c.nb * cols), 0.f);
          for (uint32_t t = 0; t < 3; ++t) {
            std::vector<float> g = random_vec(size_t(n), 10 + t, -0.01f, 0.01f);
            if (t == 1) g[size_t(n / 2)] = std::numeric_limits<float>::quiet_NaN();
            kernels::cpu::adafactor_factored_update(l, s, p.data(), g.data(), vr.data(), vc.data(),
                                                    momentum ? m.data() : nullptr);
            kernels::cpu::adafactor_unfactored_update(c.nb, c.outer * c.inner, s, p2.data(), g.data(), v.data(),
                                                      momentum ? m2.data() : nullptr);
          }
          append(b, p), append(b, vr), append(b, vc), append(b, m), append(b, p2), append(b, v), append(b, m2);
        }
        return b;
      });
    }
}

// Adafactor's phases for split params (kernels.h): the statistics, the
// clipping sums and the apply, each on its own (the factors, step sizes and
// divisors between them are inputs here), both orientations, batch dims,
// momentum and NaN skipping.
TEST(CrossTarget, AdafactorPhases) {
  struct Case {
    int64_t nb, outer, inner;
  };
  for (const Case c : {Case{1, 7, 13}, Case{2, 45, 517}, Case{1, 70, 1030}})
    for (int flags = 0; flags < 4; ++flags) {
      kernels::AdafactorScalars s;
      s.decay = 0.8f, s.mixing = 0.2f, s.eps1 = 1e-30f, s.clip = true, s.grad_scale = 0.5f;
      s.skip_nan = flags & 2, s.b1 = 0.9f, s.one_minus_b1 = 0.1f, s.keep_w = 0.999f;
      const bool momentum = flags & 1;
      const int64_t n = c.nb * c.outer * c.inner;
      const std::string what = "adafactor phases " + std::to_string(c.nb) + "x" + std::to_string(c.outer) + "x" +
                               std::to_string(c.inner) + " flags=" + std::to_string(flags);
      expect_same_on_every_target(what, [&] {
        Bytes b;
        std::vector<float> g = random_vec(size_t(n), 10, -0.01f, 0.01f);
        g[size_t(n / 2)] = std::numeric_limits<float>::quiet_NaN();
        const std::vector<float> scale = random_vec(size_t(c.nb), 4, 0.001f, 0.01f);
        const std::vector<float> denom = random_vec(size_t(c.nb), 5, 1.f, 2.f);
        for (bool row_outer : {true, false}) {
          kernels::FactoredLayout l;
          l.nb = c.nb, l.n_outer = c.outer, l.n_inner = c.inner, l.row_outer = row_outer;
          const int64_t rows = row_outer ? c.outer : c.inner, cols = row_outer ? c.inner : c.outer;
          std::vector<float> p = random_vec(size_t(n), 1, -0.5f, 0.5f), m(size_t(n), 0.01f);
          std::vector<float> p2 = p, m2 = m, v = random_vec(size_t(n), 2, 1e-6f, 1e-4f);
          const std::vector<float> rf = random_vec(size_t(c.nb * rows), 6, 0.5f, 2.f);
          const std::vector<float> cf = random_vec(size_t(c.nb * cols), 7, 10.f, 100.f);
          std::vector<double> psum(size_t(c.nb)), ysum(size_t(c.nb)), rs(size_t(c.nb * rows)), cs(size_t(c.nb * cols));
          std::vector<double> psum2(size_t(c.nb)), ysum2(size_t(c.nb));
          kernels::cpu::adafactor_factored_stats(l, s, p.data(), g.data(), psum.data(), rs.data(), cs.data());
          kernels::cpu::adafactor_factored_clip_sums(l, s, g.data(), rf.data(), cf.data(), ysum.data());
          kernels::cpu::adafactor_factored_apply(l, s, p.data(), g.data(), rf.data(), cf.data(), scale.data(),
                                                 denom.data(), momentum ? m.data() : nullptr);
          kernels::cpu::adafactor_unfactored_stats(c.nb, c.outer * c.inner, s, p2.data(), g.data(), v.data(),
                                                   psum2.data(), ysum2.data());
          kernels::cpu::adafactor_unfactored_apply(c.nb, c.outer * c.inner, s, p2.data(), g.data(), v.data(),
                                                   scale.data(), denom.data(), momentum ? m2.data() : nullptr);
          append(b, psum), append(b, rs), append(b, cs), append(b, ysum), append(b, p), append(b, m);
          append(b, psum2), append(b, ysum2), append(b, v), append(b, p2), append(b, m2);
        }
        return b;
      });
    }
}

// AdamW's update (backend/cpu/adamw.cpp), with and without weight decay,
// on lengths with tails and on gradients with special values, over three steps.
TEST(CrossTarget, AdamWUpdate) {
  for (int64_t n : kLengths)
    for (float wd : {0.0f, 0.01f}) {
      const auto p0 = random_vec(size_t(n), uint32_t(n), -0.5f, 0.5f);
      expect_same_on_every_target("adamw n=" + std::to_string(n) + " wd=" + std::to_string(wd), [&] {
        kernels::AdamWScalars s;
        s.weight_decay = wd, s.step_size = -0.01f, s.eps_root = 1e-12f;
        std::vector<float> p = p0, mu(p.size(), 0.f), nu(p.size(), 0.f);
        for (uint32_t t = 1; t <= 3; ++t) {
          s.bias_correction1 = 1.0f - std::pow(s.b1, float(t)), s.bias_correction2 = 1.0f - std::pow(s.b2, float(t));
          const std::vector<float> g = inputs(n, uint32_t(n) + t, -1.f, 1.f);
          kernels::cpu::adamw_update(n, s, p.data(), g.data(), mu.data(), nu.data());
        }
        Bytes b;
        append(b, p), append(b, mu), append(b, nu);
        return b;
      });
    }
}

// Same bits, or NaN on both sides (a NaN's payload may depend on operand
// order): the optimizer kernels against their scalar references.
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(float)) == 0; }

// AdamW with the chain's clips folded in (s.clip): optax's
// clip_by_global_norm ((g / norm) * max_norm), its clip (the clamp), and both.
TEST(CrossTarget, AdamWUpdateClipped) {
  for (int64_t n : kLengths)
    for (int mode : {1, 2, 3}) {  // bit 0: the norm's scale, bit 1: the clamp
      const auto p0 = random_vec(size_t(n), uint32_t(n), -0.5f, 0.5f);
      const std::vector<float> g = inputs(n, uint32_t(n) + 7, -1.f, 1.f);
      expect_same_on_every_target("adamw clipped n=" + std::to_string(n) + " mode=" + std::to_string(mode), [&] {
        kernels::AdamWScalars s;
        s.step_size = -0.01f, s.bias_correction1 = 0.1f, s.bias_correction2 = 0.001f;
        s.clip.scale = mode & 1, s.clip.norm = 3.7f, s.clip.max_norm = 1.0f;
        s.clip.clamp = mode & 2, s.clip.max_delta = 0.2f;
        std::vector<float> p = p0, mu(p.size(), 0.f), nu(p.size(), 0.f);
        kernels::cpu::adamw_update(n, s, p.data(), g.data(), mu.data(), nu.data());
        Bytes b;
        append(b, p), append(b, mu), append(b, nu);
        return b;
      });
    }
}

// Lion's update (backend/cpu/lion.cpp), with and without weight decay and the
// chain's clips, over three steps on gradients with special values; the
// scalar reference checks optax's formula too (jnp.sign keeps +-0 and NaN).
TEST(CrossTarget, LionUpdate) {
  for (int64_t n : kLengths)
    for (int mode : {0, 1, 2}) {  // 0: plain, 1: weight decay, 2: decay + both clips
      const auto p0 = random_vec(size_t(n), uint32_t(n), -0.5f, 0.5f);
      expect_same_on_every_target("lion n=" + std::to_string(n) + " mode=" + std::to_string(mode), [&] {
        kernels::LionScalars s;
        s.b1 = 0.8f, s.one_minus_b1 = 0.2f, s.b2 = 0.95f, s.one_minus_b2 = 0.05f, s.step_size = -0.01f;
        s.weight_decay = mode ? 0.1f : 0.0f;
        if (mode == 2) s.clip.scale = true, s.clip.norm = 2.5f, s.clip.max_norm = 1.0f;
        if (mode == 2) s.clip.clamp = true, s.clip.max_delta = 0.3f;
        std::vector<float> p = p0, mu(p.size(), 0.f), want_p = p0, want_m(p.size(), 0.f);
        for (uint32_t t = 1; t <= 3; ++t) {
          const std::vector<float> g = inputs(n, uint32_t(n) + t, -1.f, 1.f);
          kernels::cpu::lion_update(n, s, p.data(), g.data(), mu.data());
          for (size_t i = 0; i < p.size(); ++i) {
            // volatile: no contraction into an FMA by the test's compiler.
            volatile float gi = g[i];
            if (s.clip.scale) gi = (gi / s.clip.norm) * s.clip.max_norm;
            if (s.clip.clamp) gi = gi > s.clip.max_delta ? s.clip.max_delta : gi < -s.clip.max_delta ? -s.clip.max_delta : gi;
            volatile float a = s.one_minus_b1 * gi, b = s.b1 * want_m[i];
            const float x = a + b;
            float u = x > 0 ? 1.f : x < 0 ? -1.f : x;
            volatile float c = s.one_minus_b2 * gi, d = s.b2 * want_m[i];
            want_m[i] = c + d;
            if (s.weight_decay != 0.0f) {
              volatile float wp = s.weight_decay * want_p[i];
              u = u + wp;
            }
            volatile float us = u * s.step_size;
            want_p[i] = want_p[i] + us;
          }
        }
        size_t bad = 0;
        for (size_t i = 0; i < p.size(); ++i) bad += !same(p[i], want_p[i]) || !same(mu[i], want_m[i]);
        EXPECT_EQ(bad, 0u) << "values off optax's formula, n=" << n << " mode=" << mode;
        Bytes b;
        append(b, p), append(b, mu);
        return b;
      });
    }
}

// SGD's update (backend/cpu/sgd.cpp): no momentum, momentum (trace) and
// Nesterov momentum, on lengths with tails and on gradients with special
// values, over three steps; the scalar reference checks the formula too.
TEST(CrossTarget, SgdUpdate) {
  for (int64_t n : kLengths)
    for (int mode : {0, 1, 2}) {  // 0: momentum=None, 1: trace, 2: Nesterov
      const auto p0 = random_vec(size_t(n), uint32_t(n), -0.5f, 0.5f);
      expect_same_on_every_target("sgd n=" + std::to_string(n) + " mode=" + std::to_string(mode), [&] {
        kernels::SgdScalars s;
        s.momentum = 0.9f, s.nesterov = mode == 2, s.step_size = -0.01f;
        std::vector<float> p = p0, tr(p.size(), 0.f), want_p = p0, want_t(p.size(), 0.f);
        for (uint32_t t = 1; t <= 3; ++t) {
          const std::vector<float> g = inputs(n, uint32_t(n) + t, -1.f, 1.f);
          kernels::cpu::sgd_update(n, s, p.data(), g.data(), mode ? tr.data() : nullptr);
          for (size_t i = 0; i < p.size(); ++i) {
            // volatile: no contraction into an FMA by the test's compiler.
            volatile float mt = s.momentum * want_t[i];
            float u = g[i];
            if (mode) {
              want_t[i] = g[i] + mt;
              volatile float mt2 = s.momentum * want_t[i];
              u = mode == 2 ? g[i] + mt2 : want_t[i];
            }
            volatile float us = u * s.step_size;
            want_p[i] = want_p[i] + us;
          }
        }
        size_t bad = 0;
        for (size_t i = 0; i < p.size(); ++i) bad += !same(p[i], want_p[i]) || (mode && !same(tr[i], want_t[i]));
        EXPECT_EQ(bad, 0u) << "values off optax's formula, n=" << n << " mode=" << mode;
        Bytes b;
        append(b, p), append(b, tr);
        return b;
      });
    }
}

// The gradient utilities (backend/cpu/grad_utils.cpp): the float64 sum of
// squares (as four exact 16-bit pieces of its bits), clip_grads (scale and
// clamp) and
// accumulate_f32, f32 and bf16, on lengths around the 2^16 sum chunk.
TEST(CrossTarget, GradUtils) {
  auto pieces = [](Bytes& b, double v) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    for (int s = 0; s < 64; s += 16) b.push_back(float((u >> s) & 0xffffu));
  };
  std::vector<int64_t> lengths(std::begin(kLengths), std::end(kLengths));
  for (int64_t n : {int64_t(65535), int64_t(65536) * 2 + 13}) lengths.push_back(n);
  for (int64_t n : lengths) {
    const std::vector<float> x = inputs(n, uint32_t(n) + 3, -2.f, 2.f);
    const std::vector<bfloat16> xb = to_bf16(x);
    // The sums on finite values (a NaN's payload is not a contract).
    const std::vector<float> f = random_vec(size_t(n), uint32_t(n) + 5, -3.f, 3.f);
    const std::vector<bfloat16> fb = to_bf16(f);
    expect_same_on_every_target("grad utils n=" + std::to_string(n), [&] {
      Bytes b;
      pieces(b, kernels::cpu::sum_of_squares(DType::f32, f.data(), n));
      pieces(b, kernels::cpu::sum_of_squares(DType::bf16, fb.data(), n));
      std::vector<float> y(x.size());
      std::vector<bfloat16> yb(x.size());
      kernels::GradClip c;
      c.scale = true, c.norm = 3.3f, c.max_norm = 0.7f, c.clamp = true, c.max_delta = 0.4f;
      kernels::cpu::clip_grads(DType::f32, x.data(), n, c, y.data());
      kernels::cpu::clip_grads(DType::bf16, xb.data(), n, c, yb.data());
      std::vector<float> acc = inputs(n, uint32_t(n) + 4, -1.f, 1.f);
      kernels::cpu::accumulate_f32(DType::f32, x.data(), n, acc.data());
      kernels::cpu::accumulate_f32(DType::bf16, xb.data(), n, acc.data());
      append(b, y), append(b, yb), append(b, acc);
      return b;
    });
  }
}

// all_finite (the trainer's check of the updated parameters): false exactly
// when one value is a NaN or an infinity, wherever it sits (the first value,
// a vector tail, past the first 2^16 chunk), in f32, bf16 and f16; values
// near the largest finite ones, denormals and -0 count as finite.
TEST(CrossTarget, AllFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf};
  for (int64_t n : {int64_t(1), int64_t(17), int64_t(1000), int64_t(65536) * 2 + 13}) {
    std::vector<float> x = random_vec(size_t(n), uint32_t(n) + 9, -3.f, 3.f);
    const float finite_edges[] = {3e38f, -3e38f, 1e-40f, -0.f};  // 3e38: finite in bf16 too
    for (size_t i = 0; i < std::size(finite_edges) && i < x.size(); ++i) x[x.size() - 1 - i] = finite_edges[i];
    std::vector<int64_t> where = {0, n - 1, n / 2};
    if (n > 65536) where.push_back(65536 + 5);
    expect_same_on_every_target("all_finite n=" + std::to_string(n), [&] {
      Bytes b;
      EXPECT_TRUE(kernels::cpu::all_finite(DType::f32, x.data(), n));
      std::vector<float16> h(x.size());
      for (size_t i = 0; i < x.size(); ++i) h[i] = float16(std::clamp(x[i], -60000.f, 60000.f));
      EXPECT_TRUE(kernels::cpu::all_finite(DType::f16, h.data(), n));
      for (int64_t at : where)
        for (float v : bad) {
          std::vector<float> y = x;
          y[size_t(at)] = v;
          const std::vector<bfloat16> yb = to_bf16(y);
          std::vector<float16> yh = h;
          yh[size_t(at)] = float16(v);
          const bool f32 = kernels::cpu::all_finite(DType::f32, y.data(), n);
          const bool b16 = kernels::cpu::all_finite(DType::bf16, yb.data(), n);
          const bool f16 = kernels::cpu::all_finite(DType::f16, yh.data(), n);
          EXPECT_FALSE(f32 || b16 || f16) << "value " << v << " at " << at << " of " << n;
          b.push_back(float(f32) + 2.f * float(b16) + 4.f * float(f16));
        }
      EXPECT_TRUE(kernels::cpu::all_finite(DType::bf16, to_bf16(x).data(), n));
      return b;
    });
  }
}

// Known answer for the order of the float64 sums (kernels.h: 8 logical
// lanes, added in a fixed tree). One row of 16 values of g^2: lane 0 holds
// 1 and 2^-24, lanes 1-7 hold 2^-54 and 0. The tree adds lanes 1-7 in pairs
// first, so 2^-53 (two lanes) is lost against 1 + 2^-24 but 2^-52 (four) is
// kept: row sum 1 + 2^-24 + 2^-52, whose mean rounds up to the float32
// (1 + 2^-23) / 16. Added one by one, every 2^-54 would be lost and the
// mean, exactly halfway, would round to even: 1/16. With decay 0 and
// mixing 1, v_row is that float32 mean.
TEST(CrossTarget, AdafactorSumsInTheEightLaneTree) {
  expect_same_on_every_target("adafactor lane sums", [&] {
    std::vector<float> g(16, 0.f);
    g[0] = 1.f, g[8] = std::ldexp(1.f, -12);
    for (int j = 1; j < 8; ++j) g[size_t(j)] = std::ldexp(1.f, -27);
    kernels::AdafactorScalars s;
    s.decay = 0.f, s.mixing = 1.f, s.eps1 = 0.f, s.eps2 = 1e-3f, s.lr = 0.01f;
    kernels::FactoredLayout l;
    l.n_outer = 1, l.n_inner = 16;
    std::vector<float> p(16, 1.f), vr(1, 0.f), vc(16, 0.f);
    kernels::cpu::adafactor_factored_update(l, s, p.data(), g.data(), vr.data(), vc.data(), nullptr);
    EXPECT_EQ(vr[0], (1.f + std::ldexp(1.f, -23)) / 16.f) << simd_target();
    EXPECT_NE(vr[0], 1.f / 16.f) << simd_target();
    Bytes b;
    append(b, vr), append(b, vc), append(b, p);
    return b;
  });
}

TEST(CrossTarget, RmsNorm) {
  for (int64_t embed : {1, 7, 16, 33, 512}) {
    const int64_t rows = 70;  // more than one 64-row dscale chunk
    const auto x = random_vec(size_t(rows * embed), uint32_t(embed), -3.f, 3.f);
    const auto dy = random_vec(size_t(rows * embed), uint32_t(embed + 1));
    const auto scale = random_vec(size_t(embed), uint32_t(embed + 2), 0.5f, 1.5f);
    const auto xb = to_bf16(x), dyb = to_bf16(dy);
    expect_same_on_every_target("rms_norm embed=" + std::to_string(embed), [&] {
      std::vector<float> y(x.size()), rstd(static_cast<size_t>(rows)), dx(x.size()), ds(static_cast<size_t>(embed)), ds2(static_cast<size_t>(embed));
      std::vector<bfloat16> yb(x.size()), dxb(x.size());
      rms_norm_forward(rows, embed, x.data(), scale.data(), 1e-6f, y.data(), rstd.data());
      rms_norm_backward(rows, embed, x.data(), scale.data(), nullptr, dy.data(), 1e-6f, dx.data(), ds.data());
      rms_norm_forward_bf16(rows, embed, xb.data(), scale.data(), 1e-6f, yb.data(), nullptr);
      rms_norm_backward_bf16(rows, embed, xb.data(), scale.data(), nullptr, dyb.data(), 1e-6f, dxb.data(), ds2.data());
      Bytes b;
      append(b, y), append(b, rstd), append(b, dx), append(b, ds), append(b, yb), append(b, dxb), append(b, ds2);
      return b;
    });
  }
}

TEST(CrossTarget, CrossEntropy) {
  for (int64_t vocab : {2, 17, 300, 5000}) {
    const int64_t rows = 5;
    const auto logits = random_vec(size_t(rows * vocab), uint32_t(vocab), -10.f, 10.f);
    std::vector<int32_t> targets(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) targets[size_t(r)] = int32_t((r * 7919) % vocab);
    const std::vector<float> dloss = {1.f, 0.5f, -2.f, 0.25f, 3.f};
    CrossEntropyOptions opt;
    opt.z_loss = 1e-4f;
    opt.label_smoothing = 0.1f;
    expect_same_on_every_target("cross_entropy vocab=" + std::to_string(vocab), [&] {
      std::vector<float> loss(static_cast<size_t>(rows)), z(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows)), dl(logits.size());
      cross_entropy_forward(rows, vocab, logits.data(), targets.data(), opt, loss.data(), z.data(), lse.data());
      cross_entropy_backward(rows, vocab, logits.data(), targets.data(), lse.data(), dloss.data(), opt, dl.data());
      Bytes b;
      append(b, loss), append(b, z), append(b, lse), append(b, dl);
      return b;
    });
  }
}

TEST(CrossTarget, ConvertAndBinary) {
  for (int64_t n : kLengths) {
    const auto x = inputs(n, uint32_t(n), -1e5f, 1e5f), y = inputs(n, uint32_t(n + 9), -3.f, 3.f);
    const auto xb = to_bf16(x), yb = to_bf16(y);
    expect_same_on_every_target("convert/binary n=" + std::to_string(n), [&] {
      std::vector<bfloat16> cb(static_cast<size_t>(n));
      std::vector<float> cf(static_cast<size_t>(n));
      convert_f32_to_bf16(x.data(), cb.data(), n);
      convert_bf16_to_f32(cb.data(), cf.data(), n);
      Bytes b;
      append(b, cb), append(b, cf);
      for (BinaryKernel op : {BinaryKernel::Add, BinaryKernel::Sub, BinaryKernel::Mul}) {
        std::vector<float> z(static_cast<size_t>(n));
        std::vector<bfloat16> zb(static_cast<size_t>(n));
        binary_f32(op, x.data(), y.data(), z.data(), n);
        binary_bf16(op, xb.data(), yb.data(), zb.data(), n);
        append(b, z), append(b, zb);
      }
      return b;
    });
  }
}

// The bf16 store of every target rounds exactly as bfloat16::from_float.
TEST(CrossTarget, Bf16RoundingEqualsScalarRule) {
  std::vector<float> x;
  for (uint32_t u = 0; u < (1u << 20); u += 37) x.push_back(std::bit_cast<float>(u * 4093u));
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(-std::numeric_limits<float>::signaling_NaN());
  std::vector<bfloat16> y(x.size());
  convert_f32_to_bf16(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i].bits, bfloat16::from_float(x[i])) << "at " << i;
}

}  // namespace
}  // namespace t5x::cpu
