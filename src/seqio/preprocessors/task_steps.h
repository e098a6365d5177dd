// The preprocessors of this directory as seqio::Preprocessor steps for a Task
// (seqio/preprocessor.h), named as in seqio / T5 gin configs.
//
// Map steps read ctx.output_features / ctx.sequence_lengths and draw
// randomness from ctx.seed (the example's seed). Block steps (dataset-level
// T5 functions) run on one pipeline block and seed with ctx.seed (the block's
// seed); e.g. reduce_concat_tokens' batches of 128 never span two blocks.
// Steps that need sequence lengths (append_eos_after_trim, span_corruption,
// ...) belong after the cache placeholder, as in seqio; before it they see no
// lengths and throw std::invalid_argument / act as documented per function.
#pragma once
#include <map>
#include <string>

#include "seqio/preprocessor.h"
#include "seqio/preprocessors/denoising.h"
#include "seqio/preprocessors/pretraining.h"

namespace seqio::preprocessors::task {

Preprocessor rekey(std::map<std::string, std::string> key_map);
Preprocessor tokenize(bool copy_pretokenized = true, bool with_eos = false);
Preprocessor tokenize_and_append_eos(bool copy_pretokenized = true);
Preprocessor append_eos();
Preprocessor append_eos_after_trim();
Preprocessor truncate_inputs_left();
Preprocessor translate(std::string source_language, std::string target_language);
Preprocessor summarize(std::string article_key, std::string summary_key);

// Block steps.
Preprocessor select_random_chunk(SelectRandomChunkOptions options = {});
Preprocessor reduce_concat_tokens(std::string feature_key = "targets", int64_t batch_size = 128);
Preprocessor split_tokens(int64_t max_tokens_per_segment, SplitTokensOptions options = {});
Preprocessor split_tokens_to_inputs_length();
Preprocessor split_tokens_to_targets_length();
Preprocessor span_corruption(SpanCorruptionOptions options = {});
Preprocessor iid_denoising();
Preprocessor prefix_lm(double noise_density = 0.5);
// Per-example denoise with a custom mask / token functions.
Preprocessor denoise(DenoiseOptions options);

}  // namespace seqio::preprocessors::task
