// Losses and metrics as t5x computes them (t5x/losses.py
// compute_weighted_cross_entropy, get_loss_normalizing_factor_and_weights;
// t5x/models.py loss_fn and compute_base_metrics; t5x.md 4).
//
// Per token: cross entropy against label-smoothed targets plus
// z_loss * logsumexp(logits)^2 (ops/fused.h softmax_cross_entropy_with_integer_labels).
// The per-token values are multiplied by the loss weights (decoder_loss_weights;
// all ones when absent) and SUMMED over batch and length, then divided by the
// loss normalising factor when there is one:
//   none                    no division (t5x default, LOSS_NORMALIZING_FACTOR = None)
//   constant c              divide by c (e.g. 233472 = 2048 * 114 for MTF checkpoints)
//   NUM_REAL_TARGET_TOKENS  divide by sum(weights)
//   NUM_TOTAL_TARGET_TOKENS divide by batch * length
//   AVERAGE_PER_SEQUENCE    weights /= per-sequence (per packed segment) weight sums
//                           (0 where that sum is 0), then divide by sum(new weights)
// For the special factors, missing weights default to (decoder_target_tokens > 0).
#pragma once
#include <map>
#include <optional>
#include <string>

#include "core/array.h"

namespace t5x {

// seqio feature name -> array (int32 [batch, length] unless noted).
using Batch = std::map<std::string, Array>;

struct LossNormalizingFactor {
  enum class Kind { none, constant, num_real_target_tokens, num_total_target_tokens, average_per_sequence };
  Kind kind = Kind::none;
  double value = 0.0;  // constant
  // "None", a number, or one of the SpecialLossNormalizingFactor names
  // (case-insensitive, optional "SpecialLossNormalizingFactor." prefix).
  // Throws std::invalid_argument("[loss_normalizing_factor] ...").
  static LossNormalizingFactor parse(const std::string& text);
  static LossNormalizingFactor constant(double c) { return {Kind::constant, c}; }
  std::string to_string() const;
};

struct LossOptions {
  double z_loss = 1e-4;
  double label_smoothing = 0.0;
  LossNormalizingFactor loss_normalizing_factor;
  // Mixture-of-Experts models (t5x contrib/moe MoeEncoderDecoderModel /
  // MoeDecoderOnlyModel; moe.md 1.8): loss += aux_loss_factor * (mean over
  // the MoE layers of the load-balancing loss) + router_z_loss_factor *
  // (mean of the router z-loss). t5x's defaults are 0.0; the MoE gins set them.
  double aux_loss_factor = 0.0;
  double router_z_loss_factor = 0.0;
};

// A metric as t5x aggregates it. An average (clu_metrics.Average: accuracy,
// loss_per_nonpadding_target_token) sums total and count over microbatches,
// processes and steps, value = total / count. A per-step metric
// (t5x metrics_lib.AveragePerStep and Sum: loss, num_examples) sums total
// within a step and averages it over steps; its count is unused (1). The kind
// is explicit: a count of 1 is also what an average over one token has.
struct Metric {
  double total = 0.0;
  double count = 0.0;
  bool per_step = false;
  static Metric step(double total) { return {total, 1.0, true}; }
  static Metric average(double total, double count) { return {total, count, false}; }
  double value() const { return per_step ? total : count != 0.0 ? total / count : 0.0; }
};
using Metrics = std::map<std::string, Metric>;

struct LossOutput {
  Array loss;     // f32 scalar, differentiable
  Array z_loss;   // f32 scalar (weighted, normalised like the loss), reporting only
  Array weights;  // the weights actually used, f32 [batch, length]
};

// The normalising factor (nullopt = none) and the weights to use, as t5x.
std::pair<std::optional<double>, Array> loss_normalizing_factor_and_weights(const LossNormalizingFactor& lnf,
                                                                            const Batch& batch);

// logits f32 [batch, length, vocab], targets int [batch, length],
// weights f32 [batch, length] or null (= all ones).
LossOutput compute_weighted_cross_entropy(const Array& logits, const Array& targets, const Array& weights,
                                          double z_loss, double label_smoothing,
                                          std::optional<double> loss_normalizing_factor);

// The whole t5x loss_fn tail: weights + factor from the batch, weighted
// cross entropy, metrics.
LossOutput t5x_loss(const Array& logits, const Batch& batch, const LossOptions& opts);

// compute_base_metrics: accuracy (weighted, argmax == target), loss,
// loss_per_nonpadding_target_token, loss_per_all_target_tokens,
// nonpadding_fraction, z_loss, z_loss_per_all_target_tokens, cross_ent_loss,
// cross_ent_loss_per_all_target_tokens, and token counts
// (num_examples, num_tokens, num_nonpadding_tokens; effective_batch_size/decoder
// when packed).
Metrics compute_base_metrics(const Array& logits, const Array& targets, const Array& weights, const LossOutput& out,
                             const Array& segment_ids = Array());

}  // namespace t5x
