// t5x's EncoderDecoderModel and DecoderOnlyModel (t5x/models.py): parameter
// init, teacher-forced logits, loss_fn with metrics, score_batch and
// predict_batch (decoding with a KV cache).
//
// Batches use seqio's feature names (int32 [batch, length] each):
//   encoder-decoder: encoder_input_tokens, decoder_input_tokens, decoder_target_tokens,
//     decoder_loss_weights (f32 or int), and when packed encoder_segment_ids,
//     decoder_segment_ids, encoder_positions, decoder_positions;
//   decoder-only: decoder_input_tokens, decoder_target_tokens, decoder_loss_weights,
//     decoder_causal_attention (prefix LM), decoder_segment_ids, decoder_positions.
// Dropout is on when a dropout key is given and config.dropout_rate > 0.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/random.h"
#include "mesh/logical_axis_rules.h"
#include "t5x/models/config.h"
#include "t5x/models/decoding.h"
#include "t5x/models/losses.h"
#include "t5x/models/network.h"

namespace t5x {

struct DecodeOptions {
  enum class Method { default_for_model, beam_search, temperature_sample };
  Method method = Method::default_for_model;  // enc-dec: beam_search; decoder-only: temperature_sample
  BeamSearchOptions beam{1, 0.6, 1};          // t5x DecoderParams default: num_decodes = 1
  SamplingOptions sampling;
  bool return_all_decodes = false;
};

struct PredictOutput {
  Array tokens;  // int32 [batch, length], or [batch, decodes, length] with return_all_decodes
  Array scores;  // f32 [batch] or [batch, decodes]
};

class BaseTransformerModel {
 public:
  BaseTransformerModel(T5Config config, LossOptions loss) : cfg_(std::move(config)), loss_(loss) {}
  virtual ~BaseTransformerModel() = default;
  const T5Config& config() const { return cfg_; }
  const LossOptions& loss_options() const { return loss_; }

  virtual nn::ParamSpecs param_specs() const = 0;
  nn::LogicalAxes param_axes() const { return nn::logical_axes(param_specs()); }
  int64_t num_params() const { return nn::count_params(param_specs()); }
  ParamTree init(const PRNGKey& key) const { return nn::init_params(param_specs(), key); }

  // Teacher-forced logits f32 [batch, length, vocab].
  Array logits(const ParamTree& params, const Batch& batch, nn::DropoutKeys dropout_rng = {}) const {
    return forward(params, batch, dropout_rng, nullptr);
  }
  // t5x loss_fn: (loss scalar, differentiable; metrics). With MoE layers
  // (t5x contrib/moe loss_fn; moe.md 1.8): loss = cross entropy (with its
  // z_loss) + aux_loss_factor * mean_layers(auxiliary_loss) +
  // router_z_loss_factor * mean_layers(router_z_loss); metrics add
  // experts/auxiliary_loss and experts/router_z_loss (both multiplied by their
  // factors), experts/fraction_tokens_left_behind, experts/expert_usage,
  // experts/router_confidence (means over the MoE layers), and
  // cross_ent_loss = loss - z_loss - both expert losses.
  std::pair<Array, Metrics> loss_fn(const ParamTree& params, const Batch& batch,
                                    nn::DropoutKeys dropout_rng = {}) const;
  // Sum over length of log p(target) * decoder_loss_weights (no z-loss, no
  // label smoothing); weights default to target > 0. f32 [batch].
  Array score_batch(const ParamTree& params, const Batch& batch) const;
  virtual PredictOutput predict_batch(const ParamTree& params, const Batch& batch,
                                      const DecodeOptions& opts = {}) const = 0;
  // The parameters laid out for decoding, made once per parameter set when
  // many batches are decoded with one (infer, the inference evaluator, a
  // benchmark); predict_batch and cached_step_fn otherwise make the layout at
  // every call. decoder/logits_dense/kernel is kept [vocab, embed] (the
  // decode step's widest product then streams it in read order) and, with a
  // bf16 model, the encoder's and decoder's layer kernels that are cast to
  // the activation dtype at every use (attention projections, MLP wi / wo) are
  // cast to bf16 once; the logits kernel, MoE routers and mixing kernels stay
  // as they are. A gated GELU MLP's wi_0 and wi_1 are stacked into one
  // kernel, prefix/wi_fused/kernel [embed, mlp_branch=2, mlp]
  // (nn::fuse_gated_wi), so that a decode step runs them as one product.
  // Where this process holds the whole logits kernel, its screen for greedy
  // decoding is added (make_logits_screen, under kLogitsScreenName and
  // kLogitsScreenBoundsName: bf16 [vocab, embed] and f32 [vocab, 2], about
  // half the kernel's bytes again), so that a greedy step of up to 8 rows
  // reads the kernel at bf16 width (decode_step_tokens).
  // Otherwise the same names; the same values as they are used, so every
  // method of the model takes the result and decodes to the same bits; not
  // for training (the optimizer needs the f32 kernels under their own
  // names). Idempotent; the caller keeps `params` unchanged.
  ParamTree decode_params(const ParamTree& params) const;

 protected:
  // The forward pass; each MoE layer appends its metrics to *moe_metrics
  // when given. A dropout key means training (t5x enable_dropout): the MoE
  // layers' train capacity factor, and their jitter keys derived from it.
  virtual Array forward(const ParamTree& params, const Batch& batch, const nn::DropoutKeys& dropout_rng,
                        std::vector<nn::MoeMetrics>* moe_metrics) const = 0;
  T5Config cfg_;
  LossOptions loss_;
};

// The MoE layers' part of loss_fn: adds the weighted expert losses to
// `loss` and the expert metrics to `metrics` (no-op without layers).
Array add_expert_losses(const Array& loss, const std::vector<nn::MoeMetrics>& layers, const LossOptions& opts,
                        const Array& z_loss, Metrics& metrics);

class EncoderDecoderModel : public BaseTransformerModel {
 public:
  explicit EncoderDecoderModel(T5Config config, LossOptions loss = {}) : BaseTransformerModel(std::move(config), loss) {}
  nn::ParamSpecs param_specs() const override { return encoder_decoder_param_specs(cfg_); }
  // Decodes targets of length decoder_input_tokens' length (or
  // decoder_target_tokens'), from encoder_input_tokens.
  PredictOutput predict_batch(const ParamTree& params, const Batch& batch, const DecodeOptions& opts = {}) const override;
  // Step functions over encoder_input_tokens: incremental (KV cache, cross
  // keys / values computed once) or a full decoder pass per step (oracle).
  std::unique_ptr<DecodeStepFn> cached_step_fn(const ParamTree& params, const Array& encoder_input_tokens,
                                               int64_t max_length) const;
  std::unique_ptr<DecodeStepFn> full_forward_step_fn(const ParamTree& params, const Array& encoder_input_tokens) const;

 protected:
  Array forward(const ParamTree& params, const Batch& batch, const nn::DropoutKeys& dropout_rng,
                std::vector<nn::MoeMetrics>* moe_metrics) const override;
};

// inputs_bidirectional_attention (t5x DecoderOnlyModel, default False): only
// when true does the batch's decoder_causal_attention make the inputs region
// bidirectional (prefix LM); otherwise the model is a plain causal LM and
// decoder_causal_attention only marks the prompt for predict_batch.
class DecoderOnlyModel : public BaseTransformerModel {
 public:
  explicit DecoderOnlyModel(T5Config config, LossOptions loss = {}, bool inputs_bidirectional_attention = false)
      : BaseTransformerModel(std::move(config), loss), bidirectional_(inputs_bidirectional_attention) {}
  bool inputs_bidirectional_attention() const { return bidirectional_; }
  nn::ParamSpecs param_specs() const override { return decoder_only_param_specs(cfg_); }
  // The prompt of row b is decoder_input_tokens[b, :P_b], P_b =
  // sum(decoder_causal_attention[b]) (1, i.e. BOS only, without it). The
  // cache is prefilled with it (bidirectionally with
  // inputs_bidirectional_attention) and decoding continues from position P_b - 1.
  // Returns the continuation only (targets from position P_b - 1 on,
  // left-aligned, zero padded), as t5x removes the prompt.
  PredictOutput predict_batch(const ParamTree& params, const Batch& batch, const DecodeOptions& opts = {}) const override;
  // decoder_causal_attention here is the bidirectional region (null = causal).
  std::unique_ptr<DecodeStepFn> cached_step_fn(const ParamTree& params, const Array& prompt_tokens,
                                               const Array& decoder_causal_attention,
                                               const std::vector<int64_t>& start_index) const;
  std::unique_ptr<DecodeStepFn> full_forward_step_fn(const ParamTree& params,
                                                     const Array& decoder_causal_attention) const;

 protected:
  Array forward(const ParamTree& params, const Batch& batch, const nn::DropoutKeys& dropout_rng,
                std::vector<nn::MoeMetrics>* moe_metrics) const override;

 private:
  bool bidirectional_ = false;
};

// model-info.txt text (t5x.md 3.2): one line per parameter with its name,
// size, named shape and partition spec under `rules` (e.g.
// standard_logical_axis_rules()), then the total. With a mesh, a kv_heads
// dim the mesh does not divide shows replicated (replicate_indivisible_kv_heads)
// and each spec is checked for divisibility (throws "[sharding] ...").
std::string model_info(const nn::ParamSpecs& specs, const LogicalAxisRules& rules, const MeshDesc* mesh = nullptr);
// "(None, 'model')" / "('data', ('data', 'model'))".
std::string partition_spec_text(const PartitionSpec& spec);

}  // namespace t5x
