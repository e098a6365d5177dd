#include "seqio/preprocessors/task_steps.h"

#include "seqio/preprocessors/basic.h"
#include "seqio/preprocessors/formatting.h"

namespace seqio::preprocessors::task {

Preprocessor rekey(std::map<std::string, std::string> key_map) {
  return Preprocessor::Map("rekey", [key_map](Example x, const PreprocessContext&) {
    return std::optional<Example>(preprocessors::rekey(x, key_map));
  });
}

Preprocessor tokenize(bool copy_pretokenized, bool with_eos) {
  return Preprocessor::Map(with_eos ? "tokenize_and_append_eos" : "tokenize",
                           [=](Example x, const PreprocessContext& ctx) {
                             return std::optional<Example>(preprocessors::tokenize(
                                 x, ctx.output_features, copy_pretokenized, with_eos));
                           });
}

Preprocessor tokenize_and_append_eos(bool copy_pretokenized) {
  return tokenize(copy_pretokenized, true);
}

Preprocessor append_eos() {
  return Preprocessor::Map("append_eos", [](Example x, const PreprocessContext& ctx) {
    return std::optional<Example>(preprocessors::append_eos(x, ctx.output_features));
  });
}

Preprocessor append_eos_after_trim() {
  return Preprocessor::Map("append_eos_after_trim", [](Example x, const PreprocessContext& ctx) {
    return std::optional<Example>(
        preprocessors::append_eos_after_trim(x, ctx.output_features, ctx.sequence_lengths));
  });
}

Preprocessor truncate_inputs_left() {
  return Preprocessor::Map("truncate_inputs_left", [](Example x, const PreprocessContext& ctx) {
    return std::optional<Example>(preprocessors::truncate_inputs_left(x, ctx.sequence_lengths));
  });
}

Preprocessor translate(std::string source_language, std::string target_language) {
  return Preprocessor::Map("translate", [=](Example x, const PreprocessContext&) {
    return std::optional<Example>(preprocessors::translate(x, source_language, target_language));
  });
}

Preprocessor summarize(std::string article_key, std::string summary_key) {
  return Preprocessor::Map("summarize", [=](Example x, const PreprocessContext&) {
    return std::optional<Example>(preprocessors::summarize(x, article_key, summary_key));
  });
}

Preprocessor select_random_chunk(SelectRandomChunkOptions options) {
  return Preprocessor::Block("select_random_chunk",
                             [options](std::vector<Example> b, const PreprocessContext& ctx) {
                               return preprocessors::select_random_chunk(b, ctx.seed, options);
                             });
}

Preprocessor reduce_concat_tokens(std::string feature_key, int64_t batch_size) {
  return Preprocessor::Block("reduce_concat_tokens",
                             [=](std::vector<Example> b, const PreprocessContext&) {
                               return preprocessors::reduce_concat_tokens(b, feature_key,
                                                                          batch_size);
                             });
}

Preprocessor split_tokens(int64_t max_tokens_per_segment, SplitTokensOptions options) {
  return Preprocessor::Block("split_tokens",
                             [=](std::vector<Example> b, const PreprocessContext& ctx) {
                               return preprocessors::split_tokens(b, max_tokens_per_segment,
                                                                  ctx.seed, options);
                             });
}

Preprocessor split_tokens_to_inputs_length() {
  return Preprocessor::Block("split_tokens_to_inputs_length",
                             [](std::vector<Example> b, const PreprocessContext& ctx) {
                               return preprocessors::split_tokens_to_inputs_length(
                                   b, ctx.sequence_lengths, ctx.output_features, ctx.seed);
                             });
}

Preprocessor split_tokens_to_targets_length() {
  return Preprocessor::Block("split_tokens_to_targets_length",
                             [](std::vector<Example> b, const PreprocessContext& ctx) {
                               return preprocessors::split_tokens_to_targets_length(
                                   b, ctx.sequence_lengths, ctx.output_features, ctx.seed);
                             });
}

Preprocessor span_corruption(SpanCorruptionOptions options) {
  return Preprocessor::Block("span_corruption",
                             [options](std::vector<Example> b, const PreprocessContext& ctx) {
                               return preprocessors::span_corruption(
                                   b, ctx.sequence_lengths, ctx.output_features, ctx.seed,
                                   options);
                             });
}

Preprocessor iid_denoising() {
  return Preprocessor::Block("iid_denoising",
                             [](std::vector<Example> b, const PreprocessContext& ctx) {
                               return preprocessors::iid_denoising(b, ctx.sequence_lengths,
                                                                   ctx.output_features, ctx.seed);
                             });
}

Preprocessor prefix_lm(double noise_density) {
  return Preprocessor::Block("prefix_lm",
                             [=](std::vector<Example> b, const PreprocessContext& ctx) {
                               return preprocessors::prefix_lm(b, ctx.sequence_lengths,
                                                               ctx.output_features, ctx.seed,
                                                               noise_density);
                             });
}

Preprocessor denoise(DenoiseOptions options) {
  return Preprocessor::Map("denoise", [options](Example x, const PreprocessContext& ctx) {
    const int32_t vocab_size = denoise_vocab_size(ctx.output_features, options.input_feature_key);
    return std::optional<Example>(denoise_example(x, vocab_size, Rng(ctx.seed), options));
  });
}

}  // namespace seqio::preprocessors::task
