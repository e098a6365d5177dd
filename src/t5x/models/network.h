// The T5 encoder-decoder and decoder-only Transformers (t5x
// examples/t5/network.py and examples/decoder_only/network.py; t5x.md 4),
// as pure functions of (config, params, inputs).
//
// Block structure (pre-norm residual): embed -> dropout -> layers -> final
// RMSNorm -> dropout -> logits. Encoder layer: LN, bidirectional
// self-attention with the stack's relative position bias, dropout, residual;
// LN, MLP, dropout, residual. Decoder layer: LN, causal self-attention
// (unidirectional bias), dropout, residual; [enc-dec: LN, cross-attention
// without position bias, dropout, residual]; LN, MLP, dropout, residual.
// Logits are float32: untied `logits_dense`, or tied embedding^T / sqrt(emb_dim).
//
// Inputs use the seqio feature names and dims: tokens int32 [batch, length]
// (0 = padding). Masks (flax make_attention_mask / make_decoder_mask):
//   encoder self:  (enc > 0) x (enc > 0)  [and equal encoder_segment_ids]
//   decoder self:  causal and (target > 0) x (target > 0) [and equal segment ids]
//                  [or, inside decoder_causal_attention, bidirectional (prefix LM)]
//   cross:         (target > 0) x (enc > 0) [and decoder / encoder segment ids equal]
// Null Arrays mean "absent". Outputs: logits f32 [batch, length, vocab].
#pragma once
#include <cstdint>
#include <vector>

#include <optional>

#include "core/array.h"
#include "core/random.h"
#include "nn/dropout.h"
#include "nn/moe.h"
#include "ops/autodiff.h"
#include "ops/einsum.h"
#include "t5x/models/config.h"

namespace t5x {

// What the Mixture-of-Experts layers (T5Config::sparse_layer) take from and
// give to the caller of a forward pass. An explicit argument rather than a
// scope with process-wide state (as nn::ActivationConstraintScope): the
// forward stays a pure function of its arguments, and mesh runs may run
// several forwards on different threads at once. Null (the default, and
// every cached-decoding path): eval capacity factor, no jitter, metrics
// dropped.
struct MoeContext {
  // t5x's enable_dropout (a dropout key was given): the train capacity factor
  // and, with jitter_noise > 0, jitter. Independent of the dropout rate
  // (pretraining runs at rate 0 but still trains with the train capacity).
  bool train = false;
  // Base key of the 'jitter' stream; layer i of stack s (0 encoder, 1
  // decoder) uses fold_in(fold_in(jitter, s), i).
  std::optional<PRNGKey> jitter;
  // Each sparse layer appends its metrics, in forward order (encoder layers, then decoder layers).
  std::vector<nn::MoeMetrics>* metrics = nullptr;
};

// Sparse Mixer's LINEAR mixing sublayer (T5Config::Mixing::kLinear):
// x [..., length=L, ..., embed=d, ...] -> W_seq . X . W_hidden per example,
// x's shape, dim order and dtype. Params prefix/seq/kernel [length=L,
// mixing_length=L] (= W_seq transposed) and prefix/hidden/kernel [embed=d,
// mlp=d] (= W_hidden). Nothing is masked: padding is mixed too.
Array linear_mix(const ParamTree& params, const std::string& prefix, const Array& x);

// encoder_input_tokens [batch, length] -> encoded [batch, length, embed] (cfg.dtype).
Array t5_encode(const T5Config& cfg, const ParamTree& params, const Array& encoder_input_tokens,
                const Array& encoder_segment_ids, nn::Dropout& dropout, const MoeContext* moe = nullptr);

// Teacher-forced decoder of the encoder-decoder model -> logits.
Array t5_decode(const T5Config& cfg, const ParamTree& params, const Array& encoded,
                const Array& encoder_input_tokens, const Array& decoder_input_tokens,
                const Array& decoder_target_tokens, const Array& encoder_segment_ids,
                const Array& decoder_segment_ids, nn::Dropout& dropout, const MoeContext* moe = nullptr);

// Decoder-only forward (causal LM; prefix LM when decoder_causal_attention is given).
Array decoder_only_forward(const T5Config& cfg, const ParamTree& params, const Array& decoder_input_tokens,
                           const Array& decoder_target_tokens, const Array& decoder_segment_ids,
                           const Array& decoder_causal_attention, nn::Dropout& dropout,
                           const MoeContext* moe = nullptr);

// Autoregressive cache of one decoder stack (t5x's cached_key / cached_value /
// cache_index, laid out [batch, kv_length, heads|kv_heads, kv]).
struct DecoderCache {
  int64_t max_length = 0;
  std::vector<Array> self_key, self_value;    // per layer, kv_length = max_length; activation dtype
  std::vector<Array> cross_key, cross_value;  // per layer, kv_length = encoder length (enc-dec);
                                              // activation dtype
  Array encoder_mask;                         // bool [batch, kv_length] (enc-dec)
  Array index;                                // int32 [batch]: position the next step writes
  int64_t batch() const { return index.dim("batch"); }
  // Keeps / repeats rows: row r of the result is old row rows[r] (beam
  // expansion [e0, e0, e1, e1, ...] and beam reordering).
  void gather_rows(const std::vector<int64_t>& rows);
};

// Cross-attention keys / values computed once from the encoder output; empty
// self-attention cache of max_length positions, index 0.
DecoderCache t5_init_decoder_cache(const T5Config& cfg, const ParamTree& params, const Array& encoded,
                                   const Array& encoder_input_tokens, int64_t max_length);
// Decoder-only cache prefilled with a teacher-forced (prefix-LM) pass over
// decoder_input_tokens [batch, length <= max_length]; index = start_index
// (int32 [batch]); positions >= index are overwritten by later steps.
DecoderCache decoder_only_prefill(const T5Config& cfg, const ParamTree& params, const Array& decoder_input_tokens,
                                  const Array& decoder_causal_attention, const Array& start_index,
                                  int64_t max_length);
// One step: tokens int32 [batch] at positions cache.index -> logits f32
// [batch, vocab]; writes the new keys / values and advances cache.index.
Array t5_decode_step(const T5Config& cfg, const ParamTree& params, DecoderCache& cache, const Array& tokens);
Array decoder_only_decode_step(const T5Config& cfg, const ParamTree& params, DecoderCache& cache,
                               const Array& tokens);
// The same step (t5_decode_step when encoder_decoder, else
// decoder_only_decode_step) giving greedy decoding's next tokens int32
// [batch]: bitwise argmax(logits, "vocab") of that step's logits. With the
// logits kernel's screen in params (BaseTransformerModel::decode_params,
// kLogitsScreenName) and the whole product on this process, a step of up to
// 8 rows reads the kernel at bf16 width (ops screened_dense_argmax).
Array decode_step_tokens(const T5Config& cfg, const ParamTree& params, DecoderCache& cache, const Array& tokens,
                         bool encoder_decoder);
// The same step giving top-k sampling's candidates (keep = k >= 1, else
// std::invalid_argument): ops screened_dense_candidates's index and value
// [batch, candidates] on the screen, as decode_step_tokens takes it; without
// it, every vocabulary entry: no index array and the step's logits.
ScreenedCandidateArrays decode_step_candidates(const T5Config& cfg, const ParamTree& params, DecoderCache& cache,
                                               const Array& tokens, bool encoder_decoder, int64_t keep);
// Where decode_params keeps the logits kernel's screen (make_logits_screen).
inline constexpr const char* kLogitsScreenName = "decoder/logits_dense/kernel_screen";
inline constexpr const char* kLogitsScreenBoundsName = "decoder/logits_dense/kernel_screen_bounds";

}  // namespace t5x
