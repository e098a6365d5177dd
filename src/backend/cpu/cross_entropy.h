// Fused softmax cross-entropy over the vocabulary with z-loss and label
// smoothing, reproducing t5x `losses.compute_weighted_cross_entropy` /
// `cross_entropy_with_logits` (per-token values, before loss weights).
//
// Shapes: logits, dlogits [rows, vocab] row-major f32; targets [rows] int32 in
// [0, vocab); loss, z_loss, lse, dloss [rows] f32.
// With V = vocab, ls = label_smoothing, confidence c = 1 - ls and
// off-value o = ls / (V - 1), the soft target is t_v = c if v == target else o.
// Per row (lse = logsumexp_v logits[v]):
//   xent   = -sum_v t_v (logits[v] - lse) - normalizing_constant
//   normalizing_constant = -(c log c + (V - 1) o log(o + 1e-20))
//   z_loss = z_loss_coef * lse^2
//   loss   = xent + z_loss
// Backward (t5x's custom VJP; the z_loss output carries no gradient):
//   dlogits[v] = dloss * ((1 + 2 z_loss_coef lse) softmax(logits)[v] - t_v)
// The forward reads each row once (online max/sum-exp, Milakov & Gimelshein
// 2018) and never stores the softmax. dlogits may alias logits.
// Errors: std::invalid_argument("[cross_entropy] ...") for a target outside
// [0, vocab) (names the row), vocab < 1, or label_smoothing outside [0, 1)
// (or > 0 with vocab == 1).
#pragma once
#include <cstdint>

namespace t5x::cpu {

struct CrossEntropyOptions {
  float z_loss = 0.0f;           // t5x gin default Z_LOSS = 1e-4
  float label_smoothing = 0.0f;  // t5x gin default LABEL_SMOOTHING = 0
};

// z_loss_out and lse_out may be null.
void cross_entropy_forward(int64_t rows, int64_t vocab, const float* logits,
                           const int32_t* targets, const CrossEntropyOptions& opt,
                           float* loss, float* z_loss_out, float* lse_out);

// lse from the forward pass, or null to recompute it.
void cross_entropy_backward(int64_t rows, int64_t vocab, const float* logits,
                            const int32_t* targets, const float* lse, const float* dloss,
                            const CrossEntropyOptions& opt, float* dlogits);

}  // namespace t5x::cpu
