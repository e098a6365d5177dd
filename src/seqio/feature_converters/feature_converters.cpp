#include "seqio/feature_converters/feature_converters.h"

#include <algorithm>
#include <stdexcept>

#include "seqio/feature_converters/packing.h"

namespace seqio {
namespace {

const char* held_type(const FeatureValue& v) {
  switch (v.index()) {
    case 0: return "string (rank 0)";
    case 1: return "int32 tokens (rank 1)";
    case 2: return "int64 (rank 0)";
    default: return "float64 (rank 0)";
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
  return "[" + s + "]";
}

Tokens non_padding(const Tokens& t) {
  Tokens w(t.size());
  for (size_t i = 0; i < t.size(); ++i) w[i] = t[i] != 0 ? 1 : 0;
  return w;
}

const Tokens& row_tokens(const Example& row, const std::string& key) { return get_tokens(row, key); }

}  // namespace

void ConversionStats::merge(const ConversionStats& o) {
  input_examples += o.input_examples;
  output_examples += o.output_examples;
  for (const auto& [k, v] : o.trimmed_examples) trimmed_examples[k] += v;
  for (const auto& [k, v] : o.trimmed_tokens) trimmed_tokens[k] += v;
  for (const auto& [k, v] : o.tokens) tokens[k] += v;
}

FeatureConverter::FeatureConverter(FeatureConverterOptions options) : options_(std::move(options)) {
  if (options_.pack && !options_.passthrough_features.empty())
    throw std::invalid_argument("[FeatureConverter] packing is incompatible with passthrough features");
}
FeatureConverter::~FeatureConverter() = default;

int64_t FeatureConverter::packing_window(const SequenceLengths& task_lengths) const {
  return options_.pack ? utils::packing_window(task_lengths) : 1;
}

std::vector<Example> FeatureConverter::pack_or_pad(const std::vector<Example>& ds,
                                                   const SequenceLengths& lengths) const {
  return options_.pack ? utils::trim_and_pack_dataset(ds, lengths)
                       : utils::trim_and_pad_dataset(ds, lengths);
}

std::vector<Example> FeatureConverter::operator()(const std::vector<Example>& ds,
                                                  const SequenceLengths& task_lengths,
                                                  ConversionStats* stats) const {
  const std::string tag = "[" + name() + "] ";
  const std::vector<std::string> own = task_features();
  const std::vector<std::string>& passthrough = options_.passthrough_features;
  std::vector<std::string> features = own;
  features.insert(features.end(), passthrough.begin(), passthrough.end());
  auto is_passthrough = [&](const std::string& k) {
    return std::find(passthrough.begin(), passthrough.end(), k) != passthrough.end();
  };
  SequenceLengths own_lengths;
  for (const auto& [k, v] : task_lengths)
    if (!is_passthrough(k)) own_lengths[k] = v;
  // 1. The lengths must name exactly the task features.
  std::vector<std::string> missing, extra;
  for (const auto& f : features)
    if (!task_lengths.count(f)) missing.push_back(f);
  for (const auto& [k, v] : task_lengths)
    if (std::find(features.begin(), features.end(), k) == features.end()) extra.push_back(k);
  if (!missing.empty())
    throw std::invalid_argument(tag + "task_feature_lengths is missing features of TASK_FEATURES: " +
                                join(missing));
  if (!extra.empty())
    throw std::invalid_argument(tag + "task_feature_lengths has features not in TASK_FEATURES: " +
                                join(extra));
  for (const auto& [k, v] : task_lengths)
    if (v < 1)
      throw std::invalid_argument(tag + "task feature length of '" + k + "' must be >= 1, got " +
                                  std::to_string(v));

  // 2. Input validation: presence, dtype/rank, length.
  ConversionStats local;
  local.input_examples = static_cast<int64_t>(ds.size());
  std::vector<Example> task_ds, passthrough_ds;
  task_ds.reserve(ds.size());
  for (size_t i = 0; i < ds.size(); ++i) {
    Example x, pass;
    for (const auto& f : features) {
      auto it = ds[i].find(f);
      if (it == ds[i].end())
        throw std::invalid_argument(tag + "example " + std::to_string(i) +
                                    " is missing the feature '" + f +
                                    "' during input_validation");
      const auto* t = std::get_if<Tokens>(&it->second);
      if (t == nullptr)
        throw std::invalid_argument(tag + "feature '" + f + "' of example " + std::to_string(i) +
                                    " has incorrect type during input_validation: got " +
                                    held_type(it->second) + ", expected int32 tokens (rank 1)");
      const int64_t L = task_lengths.at(f);
      Tokens tok = *t;
      if (static_cast<int64_t>(tok.size()) > L) {
        if (options_.apply_length_check)
          throw std::invalid_argument(
              tag + "feature '" + f + "' of example " + std::to_string(i) + " has length " +
              std::to_string(tok.size()) + ", not less than or equal to the expected length of " +
              std::to_string(L) +
              " during input_validation (trim it first, e.g. preprocessors::trim_to_lengths, or "
              "set apply_length_check=false to trim here)");
        local.trimmed_examples[f] += 1;
        local.trimmed_tokens[f] += static_cast<int64_t>(tok.size()) - L;
        tok.resize(static_cast<size_t>(L));
      }
      if (is_passthrough(f)) {
        tok.resize(static_cast<size_t>(L), 0);
        pass[f] = std::move(tok);
      } else {
        x[f] = std::move(tok);
      }
    }
    task_ds.push_back(std::move(x));
    passthrough_ds.push_back(std::move(pass));
  }

  // 3. Convert; passthrough features ride along (unpacked: one row per example).
  std::vector<Example> out = convert_features(task_ds, own_lengths);
  if (!passthrough.empty()) {
    if (out.size() != passthrough_ds.size())
      throw std::logic_error(tag + "passthrough features need one output row per example");
    for (size_t i = 0; i < out.size(); ++i)
      for (auto& [k, v] : passthrough_ds[i]) out[i][k] = std::move(v);
  }

  // 4. Output validation: exactly the model features, each of its length.
  SequenceLengths model_lengths = get_model_feature_lengths(own_lengths);
  for (const auto& k : passthrough) model_lengths[k] = task_lengths.at(k);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].size() != model_lengths.size())
      throw std::logic_error(tag + "output row " + std::to_string(i) +
                             " does not hold exactly the model features");
    for (const auto& [k, L] : model_lengths) {
      const Tokens& t = get_tokens(out[i], k);
      if (static_cast<int64_t>(t.size()) != L)
        throw std::logic_error(tag + "feature '" + k + "' has length " + std::to_string(t.size()) +
                               ", not equal to the expected length of " + std::to_string(L) +
                               " during output_validation");
    }
  }
  local.output_examples = static_cast<int64_t>(out.size());
  for (const auto& f : own)
    for (const auto& x : task_ds)
      local.tokens[f] += static_cast<int64_t>(
          std::count_if(get_tokens(x, f).begin(), get_tokens(x, f).end(),
                        [](int32_t t) { return t != 0; }));
  if (stats) stats->merge(local);
  return out;
}

// ---- EncDec ----------------------------------------------------------------

SequenceLengths EncDecFeatureConverter::get_model_feature_lengths(
    const SequenceLengths& task_lengths) const {
  const int enc = task_lengths.at("inputs"), dec = task_lengths.at("targets");
  SequenceLengths m = {{"encoder_input_tokens", enc},
                       {"decoder_target_tokens", dec},
                       {"decoder_input_tokens", dec},
                       {"decoder_loss_weights", dec}};
  if (pack()) {
    m["encoder_segment_ids"] = enc;
    m["encoder_positions"] = enc;
    m["decoder_segment_ids"] = dec;
    m["decoder_positions"] = dec;
  }
  return m;
}

std::vector<Example> EncDecFeatureConverter::convert_features(
    const std::vector<Example>& ds, const SequenceLengths& task_lengths) const {
  std::vector<Example> rows = pack_or_pad(ds, task_lengths);
  std::vector<Example> out;
  out.reserve(rows.size());
  for (const Example& r : rows) {
    const Tokens& targets = row_tokens(r, "targets");
    Example d;
    d["encoder_input_tokens"] = row_tokens(r, "inputs");
    d["decoder_target_tokens"] = targets;
    if (pack()) {
      const Tokens& seg = row_tokens(r, "targets_segment_ids");
      d["decoder_input_tokens"] = utils::make_autoregressive_inputs(targets, &seg, bos_id());
      d["encoder_segment_ids"] = row_tokens(r, "inputs_segment_ids");
      d["encoder_positions"] = row_tokens(r, "inputs_positions");
      d["decoder_segment_ids"] = seg;
      d["decoder_positions"] = row_tokens(r, "targets_positions");
    } else {
      d["decoder_input_tokens"] = utils::make_autoregressive_inputs(targets, nullptr, bos_id());
    }
    d["decoder_loss_weights"] = non_padding(targets);
    out.push_back(std::move(d));
  }
  return out;
}

// ---- LM --------------------------------------------------------------------

SequenceLengths LMFeatureConverter::get_model_feature_lengths(
    const SequenceLengths& task_lengths) const {
  const int dec = task_lengths.at("targets");
  SequenceLengths m = {{"decoder_target_tokens", dec},
                       {"decoder_input_tokens", dec},
                       {"decoder_loss_weights", dec}};
  if (pack()) {
    m["decoder_segment_ids"] = dec;
    m["decoder_positions"] = dec;
  }
  return m;
}

Example LMFeatureConverter::convert_lm_example(const Example& r) const {
  const Tokens& targets = row_tokens(r, "targets");
  Example d;
  d["decoder_target_tokens"] = targets;
  if (pack()) {
    const Tokens& seg = row_tokens(r, "targets_segment_ids");
    d["decoder_input_tokens"] = utils::make_autoregressive_inputs(targets, &seg, bos_id());
    d["decoder_segment_ids"] = seg;
    d["decoder_positions"] = row_tokens(r, "targets_positions");
  } else {
    d["decoder_input_tokens"] = utils::make_autoregressive_inputs(targets, nullptr, bos_id());
  }
  d["decoder_loss_weights"] = non_padding(targets);
  return d;
}

std::vector<Example> LMFeatureConverter::convert_features(
    const std::vector<Example>& ds, const SequenceLengths& task_lengths) const {
  std::vector<Example> rows = pack_or_pad(ds, task_lengths);
  std::vector<Example> out;
  out.reserve(rows.size());
  for (const Example& r : rows) out.push_back(convert_lm_example(r));
  return out;
}

// ---- PrefixLM --------------------------------------------------------------

SequenceLengths PrefixLMFeatureConverter::get_model_feature_lengths(
    const SequenceLengths& task_lengths) const {
  const int concat = task_lengths.at("inputs") + task_lengths.at("targets");
  SequenceLengths m = LMFeatureConverter::get_model_feature_lengths({{"targets", concat}});
  m["decoder_causal_attention"] = concat;
  return m;
}

int64_t PrefixLMFeatureConverter::packing_window(const SequenceLengths& task_lengths) const {
  return pack() ? task_lengths.at("inputs") + task_lengths.at("targets") : 1;
}

std::vector<Example> PrefixLMFeatureConverter::convert_features(
    const std::vector<Example>& ds, const SequenceLengths& task_lengths) const {
  const int concat = task_lengths.at("inputs") + task_lengths.at("targets");
  std::vector<Example> joined;
  joined.reserve(ds.size());
  for (const Example& x : ds) {
    const Tokens& inputs = get_tokens(x, "inputs");
    Tokens targets = get_tokens(x, "targets");
    if (targets.empty()) targets = {0};  // seqio: one padding target
    Tokens cat = inputs;
    cat.insert(cat.end(), targets.begin(), targets.end());
    const auto width = static_cast<int32_t>(inputs.size());
    Example y;
    // Width 0 travels as -1 so that packing (which keeps count_nonzero
    // tokens) does not drop it; restored below.
    y["inputs_width"] = Tokens(cat.size(), width == 0 ? -1 : width);
    y["inputs_width_add_pos"] = Tokens(cat.size(), width + 1);
    y["targets"] = std::move(cat);
    joined.push_back(std::move(y));
  }
  std::vector<Example> rows = pack_or_pad(
      joined, {{"targets", concat}, {"inputs_width", concat}, {"inputs_width_add_pos", concat}});
  std::vector<Example> out;
  out.reserve(rows.size());
  for (const Example& r : rows) {
    Example d = convert_lm_example(r);
    const Tokens& targets = row_tokens(r, "targets");
    Tokens width = row_tokens(r, "inputs_width");
    for (auto& w : width)
      if (w == -1) w = 0;
    const Tokens& width_add = row_tokens(r, "inputs_width_add_pos");
    Tokens positions;
    if (pack()) {
      positions = row_tokens(r, "targets_positions");
    } else {
      positions.resize(targets.size());
      for (size_t j = 0; j < positions.size(); ++j) positions[j] = static_cast<int32_t>(j);
    }
    Tokens causal(targets.size());
    for (size_t j = 0; j < targets.size(); ++j) causal[j] = positions[j] < width_add[j] ? 1 : 0;
    d["decoder_causal_attention"] = std::move(causal);
    if (loss_on_targets_only_) {
      Tokens& w = std::get<Tokens>(d["decoder_loss_weights"]);
      for (size_t j = 0; j < targets.size(); ++j) {
        const bool in_inputs = positions[j] < width[j];
        w[j] = (in_inputs != (w[j] != 0)) ? 1 : 0;
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

// ---- Encoder ---------------------------------------------------------------

SequenceLengths EncoderFeatureConverter::get_model_feature_lengths(
    const SequenceLengths& task_lengths) const {
  const int enc = task_lengths.at("inputs");
  SequenceLengths m = {{"encoder_input_tokens", enc},
                       {"encoder_target_tokens", enc},
                       {"encoder_loss_weights", enc}};
  if (pack()) {
    m["encoder_segment_ids"] = enc;
    m["encoder_positions"] = enc;
  }
  return m;
}

std::vector<Example> EncoderFeatureConverter::convert_features(
    const std::vector<Example>& ds, const SequenceLengths& task_lengths) const {
  if (task_lengths.at("inputs") != task_lengths.at("targets"))
    throw std::invalid_argument("[" + name() + "] inputs and targets lengths must be equal (got " +
                                std::to_string(task_lengths.at("inputs")) + " and " +
                                std::to_string(task_lengths.at("targets")) +
                                "): every model feature has the inputs length");
  std::vector<Example> rows = pack_or_pad(ds, task_lengths);
  std::vector<Example> out;
  out.reserve(rows.size());
  for (const Example& r : rows) {
    const Tokens& inputs = row_tokens(r, "inputs");
    Example d;
    d["encoder_input_tokens"] = inputs;
    d["encoder_target_tokens"] = row_tokens(r, "targets");
    Tokens w(inputs.size());
    for (size_t j = 0; j < inputs.size(); ++j) w[j] = inputs[j] == mask_id_ ? 1 : 0;
    d["encoder_loss_weights"] = std::move(w);
    if (pack()) {
      d["encoder_segment_ids"] = row_tokens(r, "inputs_segment_ids");
      d["encoder_positions"] = row_tokens(r, "inputs_positions");
    }
    out.push_back(std::move(d));
  }
  return out;
}

// ---- factory ---------------------------------------------------------------

std::unique_ptr<FeatureConverter> make_feature_converter(std::string_view name,
                                                         FeatureConverterOptions options,
                                                         int32_t mask_id) {
  if (name == "enc_dec" || name == "EncDecFeatureConverter")
    return std::make_unique<EncDecFeatureConverter>(options);
  if (name == "lm" || name == "LMFeatureConverter")
    return std::make_unique<LMFeatureConverter>(options);
  if (name == "prefix_lm" || name == "PrefixLMFeatureConverter")
    return std::make_unique<PrefixLMFeatureConverter>(options);
  if (name == "encoder" || name == "EncoderFeatureConverter") {
    if (mask_id < 0)
      throw std::invalid_argument("[make_feature_converter] 'encoder' needs a mask_id >= 0");
    return std::make_unique<EncoderFeatureConverter>(mask_id, options);
  }
  throw std::invalid_argument("[make_feature_converter] unknown converter '" + std::string(name) +
                              "'; expected enc_dec, lm, prefix_lm or encoder");
}

}  // namespace seqio
