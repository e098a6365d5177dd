// Feature converters: task features -> model features (seqio/feature_converters.py).
//
// A converter takes a dataset of examples with task features ("inputs",
// "targets": int32 token sequences no longer than the task feature lengths)
// and returns fixed-length int32 model features, packed or padded:
//
// | converter                | task features   | model features ([length])                  |
// |--------------------------|-----------------|--------------------------------------------|
// | EncDecFeatureConverter   | inputs, targets | encoder_input_tokens [inputs];             |
// |                          |                 | decoder_target_tokens, decoder_input_tokens,|
// |                          |                 | decoder_loss_weights [targets];            |
// |                          |                 | packed: encoder_segment_ids/positions      |
// |                          |                 | [inputs], decoder_segment_ids/positions    |
// |                          |                 | [targets]                                  |
// | LMFeatureConverter       | targets         | decoder_target_tokens, decoder_input_tokens,|
// |                          |                 | decoder_loss_weights (+ packed             |
// |                          |                 | decoder_segment_ids/positions) [targets]   |
// | PrefixLMFeatureConverter | inputs, targets | LM features + decoder_causal_attention     |
// |                          |                 | [inputs + targets]                         |
// | EncoderFeatureConverter  | inputs, targets | encoder_input_tokens, encoder_target_tokens,|
// |                          |                 | encoder_loss_weights (+ packed             |
// |                          |                 | encoder_segment_ids/positions) [inputs]    |
//
// decoder_input_tokens = make_autoregressive_inputs(targets, segment ids if
// packed, bos_id); loss weights = (token != 0) unless stated otherwise.
// Packing is seqio's default next-fit within windows (utils::trim_and_pack_dataset).
//
// Validation (seqio FeatureConverter.__call__), all std::invalid_argument
// with a "[<ConverterName>] " prefix:
//  - task_feature_lengths keys must equal the converter's task features;
//  - every example must hold each task feature as an int32 token sequence
//    (messages name the example index, the feature and what it holds);
//  - with apply_length_check (default), a feature longer than its task length
//    is an error naming the example, feature and both lengths. Without it,
//    the feature is trimmed (seqio's trim_and_pad/trim_and_pack behaviour)
//    and counted in ConversionStats.
// Extra features in the input are ignored; outputs hold exactly the model
// features.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "seqio/example.h"
#include "seqio/feature.h"

namespace seqio {

struct FeatureConverterOptions {
  bool pack = true;                 // seqio's default
  bool apply_length_check = true;
  int32_t bos_id = 0;
  // seqio passthrough_features: int32 token features copied to the output,
  // trimmed/padded to their own task length. Unpacked only (with pack the
  // constructor throws, as seqio raises "Packing is incompatible with
  // pass-through features"). Their lengths go in task_feature_lengths.
  std::vector<std::string> passthrough_features = {};
};

// What a conversion saw and did (seqio logs nothing of this; we report it).
struct ConversionStats {
  int64_t input_examples = 0;
  int64_t output_examples = 0;
  // Per task feature: examples longer than the task length, and tokens cut
  // (only non-zero when apply_length_check is false).
  std::map<std::string, int64_t> trimmed_examples;
  std::map<std::string, int64_t> trimmed_tokens;
  // Non-padding task tokens after validation/trimming, per task feature
  // (packing may still cut a sequence at an inner 0, as seqio does).
  std::map<std::string, int64_t> tokens;
  void merge(const ConversionStats& o);
};

class FeatureConverter {
 public:
  explicit FeatureConverter(FeatureConverterOptions options = {});
  virtual ~FeatureConverter();

  virtual std::string name() const = 0;
  // seqio TASK_FEATURES (names only; all are int32 rank 1).
  virtual std::vector<std::string> task_features() const = 0;
  // seqio get_model_feature_lengths: model feature -> length, including the
  // packing features when pack() is set. Passthrough features are not listed
  // here; they keep their task length.
  virtual SequenceLengths get_model_feature_lengths(const SequenceLengths& task_lengths) const = 0;

  // Validates, converts and checks the output (see the header comment).
  // For streaming, feed chunks whose sizes are multiples of
  // packing_window(task_lengths): the output then equals converting the whole
  // stream at once.
  std::vector<Example> operator()(const std::vector<Example>& ds,
                                  const SequenceLengths& task_lengths,
                                  ConversionStats* stats = nullptr) const;

  // Consecutive input examples that packing considers together (1 unpacked).
  virtual int64_t packing_window(const SequenceLengths& task_lengths) const;

  bool pack() const { return options_.pack; }
  int32_t bos_id() const { return options_.bos_id; }
  const FeatureConverterOptions& options() const { return options_; }

 protected:
  // Examples hold exactly the task features (no passthrough), valid and
  // within length; task_lengths has no passthrough keys either.
  virtual std::vector<Example> convert_features(const std::vector<Example>& ds,
                                                const SequenceLengths& task_lengths) const = 0;
  // utils::trim_and_pack_dataset or utils::trim_and_pad_dataset per pack().
  std::vector<Example> pack_or_pad(const std::vector<Example>& ds,
                                   const SequenceLengths& lengths) const;
  FeatureConverterOptions options_;
};

// T5 encoder-decoder (seqio.EncDecFeatureConverter).
class EncDecFeatureConverter : public FeatureConverter {
 public:
  using FeatureConverter::FeatureConverter;
  std::string name() const override { return "EncDecFeatureConverter"; }
  std::vector<std::string> task_features() const override { return {"inputs", "targets"}; }
  SequenceLengths get_model_feature_lengths(const SequenceLengths& task_lengths) const override;

 protected:
  std::vector<Example> convert_features(const std::vector<Example>& ds,
                                        const SequenceLengths& task_lengths) const override;
};

// Decoder-only language model (seqio.LMFeatureConverter).
class LMFeatureConverter : public FeatureConverter {
 public:
  using FeatureConverter::FeatureConverter;
  std::string name() const override { return "LMFeatureConverter"; }
  std::vector<std::string> task_features() const override { return {"targets"}; }
  SequenceLengths get_model_feature_lengths(const SequenceLengths& task_lengths) const override;

 protected:
  std::vector<Example> convert_features(const std::vector<Example>& ds,
                                        const SequenceLengths& task_lengths) const override;
  // The LM conversion of a packed/padded row holding "targets" (+ packing features).
  Example convert_lm_example(const Example& row) const;
};

// Prefix LM (seqio.PrefixLMFeatureConverter). Per example: targets' = inputs ++
// (targets, or [0] if targets is empty), padded/packed to inputs+targets
// length. decoder_causal_attention = position < |inputs| + 1 (the inputs plus
// the position that reads the last input token); with loss_on_targets_only
// (default), decoder_loss_weights = (position < |inputs|) XOR (token != 0),
// i.e. 1 only on target tokens. Positions are the packed positions, or
// 0..N-1 unpacked. An example with empty inputs keeps its width 0 through
// packing (seqio's -1 placeholder trick).
class PrefixLMFeatureConverter : public LMFeatureConverter {
 public:
  explicit PrefixLMFeatureConverter(FeatureConverterOptions options = {},
                                    bool loss_on_targets_only = true)
      : LMFeatureConverter(options), loss_on_targets_only_(loss_on_targets_only) {}
  std::string name() const override { return "PrefixLMFeatureConverter"; }
  std::vector<std::string> task_features() const override { return {"inputs", "targets"}; }
  SequenceLengths get_model_feature_lengths(const SequenceLengths& task_lengths) const override;
  int64_t packing_window(const SequenceLengths& task_lengths) const override;
  bool loss_on_targets_only() const { return loss_on_targets_only_; }

 protected:
  std::vector<Example> convert_features(const std::vector<Example>& ds,
                                        const SequenceLengths& task_lengths) const override;

 private:
  bool loss_on_targets_only_;
};

// BERT-style encoder (seqio.EncoderFeatureConverter): encoder_loss_weights =
// (inputs == mask_id). inputs and targets lengths must be equal (all model
// features have the inputs length).
class EncoderFeatureConverter : public FeatureConverter {
 public:
  explicit EncoderFeatureConverter(int32_t mask_id, FeatureConverterOptions options = {})
      : FeatureConverter(options), mask_id_(mask_id) {}
  std::string name() const override { return "EncoderFeatureConverter"; }
  std::vector<std::string> task_features() const override { return {"inputs", "targets"}; }
  SequenceLengths get_model_feature_lengths(const SequenceLengths& task_lengths) const override;
  int32_t mask_id() const { return mask_id_; }

 protected:
  std::vector<Example> convert_features(const std::vector<Example>& ds,
                                        const SequenceLengths& task_lengths) const override;

 private:
  int32_t mask_id_;
};

// Converter by its CLI / config name: "enc_dec", "lm", "prefix_lm", "encoder"
// (the seqio class names are accepted too). mask_id is used by "encoder" only.
// Throws std::invalid_argument listing the names for an unknown one.
std::unique_ptr<FeatureConverter> make_feature_converter(std::string_view name,
                                                         FeatureConverterOptions options = {},
                                                         int32_t mask_id = -1);

}  // namespace seqio
