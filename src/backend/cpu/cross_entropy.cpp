#include "backend/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

namespace t5x::cpu {
namespace {

struct Smoothing {
  float confidence, off, normalizing;
};

Smoothing check(int64_t rows, int64_t vocab, const int32_t* targets,
                const CrossEntropyOptions& opt) {
  if (rows < 0 || vocab < 1)
    throw std::invalid_argument("[cross_entropy] bad shape rows=" + std::to_string(rows) +
                                " vocab=" + std::to_string(vocab));
  float ls = opt.label_smoothing;
  if (!(ls >= 0.f && ls < 1.f) || (ls > 0.f && vocab == 1))
    throw std::invalid_argument("[cross_entropy] label_smoothing must be in [0, 1) (and "
                                "vocab > 1 when positive), got " + std::to_string(ls));
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] < 0 || targets[r] >= vocab)
      throw std::invalid_argument("[cross_entropy] target " + std::to_string(targets[r]) +
                                  " at row " + std::to_string(r) + " outside [0, " +
                                  std::to_string(vocab) + ")");
  Smoothing s;
  s.confidence = 1.f - ls;
  s.off = vocab > 1 ? ls / float(vocab - 1) : 0.f;
  // Same expression as t5x (in f32 there too).
  s.normalizing = -(s.confidence * std::log(s.confidence) +
                    float(vocab - 1) * s.off * std::log(s.off + 1e-20f));
  return s;
}

// One pass: running max m, sum of exp(x - m), plain sum of x.
struct RowStats {
  float lse, sum;
};

// Blocks stay in L1 between the max and the exp-sum, so memory is read once.
// Each piece runs on the best SIMD target with fixed-order sums (vec_math.h),
// so the statistics are bitwise the same on every CPU.
RowStats row_stats(const float* x, int64_t vocab) {
  constexpr int64_t kBlock = 2048;
  float m = -std::numeric_limits<float>::infinity(), l = 0.f, sum = 0.f;
  for (int64_t v0 = 0; v0 < vocab; v0 += kBlock) {
    int64_t n = std::min(kBlock, vocab - v0);
    const float* xb = x + v0;
    sum += sum_of(xb, n);
    float nm = std::max(m, max_of(xb, n));
    if (nm == -std::numeric_limits<float>::infinity()) continue;  // all -inf so far
    l = l * (m == nm ? 1.f : fast_exp(m - nm)) + exp_sum(xb, n, nm);
    m = nm;
  }
  return {m + std::log(l), sum};
}

}  // namespace

void cross_entropy_forward(int64_t rows, int64_t vocab, const float* logits,
                           const int32_t* targets, const CrossEntropyOptions& opt,
                           float* loss, float* z_loss_out, float* lse_out) {
  Smoothing sm = check(rows, vocab, targets, opt);
  parallel_for(rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* x = logits + r * vocab;
      RowStats st = row_stats(x, vocab);
      float xt = x[targets[r]];
      // -sum_v t_v (x_v - lse) = lse - (c x_t + o (sum_x - x_t)), as sum_v t_v = 1.
      float xent = st.lse - (sm.confidence * xt + sm.off * (st.sum - xt)) - sm.normalizing;
      float z = opt.z_loss * st.lse * st.lse;
      loss[r] = xent + z;
      if (z_loss_out) z_loss_out[r] = z;
      if (lse_out) lse_out[r] = st.lse;
    }
  });
}

void cross_entropy_backward(int64_t rows, int64_t vocab, const float* logits,
                            const int32_t* targets, const float* lse, const float* dloss,
                            const CrossEntropyOptions& opt, float* dlogits) {
  Smoothing sm = check(rows, vocab, targets, opt);
  parallel_for(rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* x = logits + r * vocab;
      float* dx = dlogits + r * vocab;
      float l = lse ? lse[r] : row_stats(x, vocab).lse;
      float g = dloss[r];
      float coef = g * (1.f + 2.f * opt.z_loss * l);
      float off = g * sm.off;
      int32_t t = targets[r];
      float xt = x[t];  // read before a possibly aliased dlogits overwrites it
      exp_affine(x, dx, vocab, l, coef, -off);
      dx[t] = coef * fast_exp(xt - l) - g * sm.confidence;
    }
  });
}

}  // namespace t5x::cpu
