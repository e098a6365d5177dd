// Autoregressive decoding as t5x/decoding.py (t5x.md 5): temperature sampling
// (greedy, top-k, top-p) and beam search with the ((5 + len) / 6)^alpha
// brevity penalty, over any step function (cached incremental decoding or a
// full forward pass per step).
//
// Coordinates. `inputs` int32 [batch, length] are target-side prompts: a
// non-zero inputs[b, j] forces target j (teacher-forced prompt, scores
// nothing); zeros are generated. The decoder input at position i is target
// i - 1 (BOS = 0 at i = 0). Step i feeds position i and produces target i.
// Each row starts at its own initial_index (decoder-only prompts prefilled in
// the cache) and all rows advance together, as t5x's per-example cur_index.
// A row stops after its first generated EOS; later targets are 0. At most
// `length` targets are produced (or max_decode_steps new ones).
// Outputs: sequences int32 [batch, decodes, length] (targets), scores f32
// [batch, decodes] = sum of the log-probabilities of the generated tokens
// (EOS included), sorted ascending by score: the best decode is the last.
#pragma once
#include <cstdint>
#include <vector>

#include "core/array.h"
#include "core/random.h"

namespace t5x {

// A model's next-token logits. Rows are decodes; the decoder tracks them.
class DecodeStepFn {
 public:
  virtual ~DecodeStepFn() = default;
  // Logits f32 [batch=rows, vocab] of the token following position index[r]
  // of decoder_inputs (int32 [batch=rows, length]); positions <= index[r]
  // are final. Called with index[r] increasing by one per call.
  virtual Array logits(const Array& decoder_inputs, const std::vector<int64_t>& index) = 0;
  // Greedy decoding's next tokens, taking the same step as logits(): row r's
  // argmax over vocab of what logits() would return (the first maximum, a NaN
  // above all: jnp.argmax's rule), bitwise. The default takes it from
  // logits(); a step that finds it without the whole logits overrides it
  // (the cached step on decode_params: ops screened_dense_argmax).
  virtual std::vector<int64_t> greedy_tokens(const Array& decoder_inputs, const std::vector<int64_t>& index);
  // Top-k sampling's candidates, taking the same step as logits(): per row,
  // vocabulary entries (index ascending) with what logits() would return
  // there, bitwise (value); index[r] empty: every entry, value[r] the whole
  // row. They include every entry whose logit is at least the row's keep-th
  // largest (ties included), and may include more. The default gives every
  // entry, from logits(); the cached step on decode_params overrides it
  // (ops screened_dense_candidates).
  struct Candidates {
    int64_t vocab = 0;
    std::vector<std::vector<int32_t>> index;
    std::vector<std::vector<float>> value;
  };
  virtual Candidates top_candidates(const Array& decoder_inputs, const std::vector<int64_t>& index, int64_t keep);
  // Row r of the new state is old row rows[r] (expansion for several decodes
  // per example, beam reordering).
  virtual void gather_rows(const std::vector<int64_t>& rows) = 0;
};

// `a` whole on this process: an array split over the current spmd context's
// mesh is all-gathered (collective: every process of the mesh calls it);
// one that is already whole is returned as it is. Decoding reads the step's
// logits and the prompts on the host through it, so a model that runs on a
// mesh (batch split over 'data', vocabulary over 'model') decodes the same
// tokens on every process.
Array gather_if_split(const Array& a);

struct DecodeResult {
  Array sequences;  // int32 [batch, decodes, length]
  Array scores;     // f32 [batch, decodes], ascending
};

// temperature_sample(temperature=1.0, topk=1, topp=0.0): the t5x defaults
// (topk = 1 is greedy). temperature <= 1e-4 (MIN_TEMPERATURE) is argmax
// (DecodeStepFn::greedy_tokens; with rescale_log_probs the logits are not
// needed for the score).
// topk and topp are exclusive (throws "[temperature_sample] ..."); masked
// logits are set to NEG_INF = -1e7. Top-k sampling at temperature 1 with
// rescale_log_probs (t5x's defaults) takes its logits from
// DecodeStepFn::top_candidates: the same tokens and scores, bitwise. topp keeps the smallest set of tokens
// whose probability reaches topp. rescale_log_probs: the score uses the
// tempered, masked distribution (t5x's default; greedy decodes score 0, as
// t5x's); otherwise log_softmax(logits).
// Step i of the loop samples with fold_in(rng, i).
struct SamplingOptions {
  double temperature = 1.0;
  int64_t topk = 1;
  double topp = 0.0;
  int64_t num_decodes = 1;
  bool rescale_log_probs = true;
  PRNGKey rng{};
  int64_t eos_id = 1;
  // At most the prompt's non-zero tokens + max_decode_steps targets (t5x's
  // max_decode_len = sum(inputs != 0) + max_decode_steps); -1: up to the
  // input length.
  int64_t max_decode_steps = -1;
};
DecodeResult temperature_sample(const Array& inputs, const std::vector<int64_t>& initial_index, DecodeStepFn& step,
                                const SamplingOptions& opts);

// t5x's length penalty ((5 + length) / 6)^alpha.
double brevity_penalty(double alpha, double length);

// beam_search(num_decodes=4, alpha=0.6): keeps 2 * beams candidates per step,
// scores finished candidates by log_prob / brevity_penalty(alpha, i + 1),
// keeps the best `beams` live (non-EOS) and finished ones, stops early when
// no live beam can beat the worst finished one (t5x's loop condition), and
// falls back to the live beams (raw log-probs) for an example with no
// finished beam. inputs must be all zeros (no prompts). Returns
// [batch, beams, length] / [batch, beams].
struct BeamSearchOptions {
  int64_t num_decodes = 4;
  double alpha = 0.6;
  int64_t eos_id = 1;
};
DecodeResult beam_search(const Array& inputs, DecodeStepFn& step, const BeamSearchOptions& opts);

}  // namespace t5x
