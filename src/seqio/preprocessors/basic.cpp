#include "seqio/preprocessors/basic.h"

#include <stdexcept>

namespace seqio::preprocessors {

int32_t eos_id_of(const Feature& f, const std::string& key, const char* op) {
  if (!f.vocabulary)
    throw std::invalid_argument(std::string("[") + op + "] output feature '" + key +
                                "' has no vocabulary");
  auto eos = f.vocabulary->eos_id();
  if (!eos)
    throw std::invalid_argument(std::string("[") + op + "] vocabulary of feature '" + key +
                                "' has no EOS id but add_eos is set");
  return *eos;
}

Example rekey(const Example& x, const std::map<std::string, std::string>& key_map) {
  if (key_map.empty()) return x;
  Example out;
  for (const auto& [new_key, old_key] : key_map) {
    if (old_key.empty()) {
      out[new_key] = std::string();
      continue;
    }
    auto it = x.find(old_key);
    if (it == x.end())
      throw std::invalid_argument("[rekey] example has no feature '" + old_key +
                                  "' (needed for new key '" + new_key + "')");
    out[new_key] = it->second;
  }
  return out;
}

Example tokenize(const Example& x, const OutputFeatures& output_features,
                 bool copy_pretokenized, bool with_eos) {
  Example out;
  for (const auto& [key, value] : x) {
    auto f = output_features.find(key);
    if (f == output_features.end()) {
      // Keep an existing value unless a copy made earlier in this call owns the key.
      out.try_emplace(key, value);
      continue;
    }
    const auto* text = std::get_if<std::string>(&value);
    if (text == nullptr)
      throw std::invalid_argument("[tokenize] output feature '" + key +
                                  "' is not text (already tokenized?)");
    if (!f->second.vocabulary)
      throw std::invalid_argument("[tokenize] output feature '" + key + "' has no vocabulary");
    Tokens ids = f->second.vocabulary->encode(*text);
    if (with_eos && f->second.add_eos) ids.push_back(eos_id_of(f->second, key, "tokenize"));
    if (copy_pretokenized) out[key + "_pretokenized"] = *text;
    out[key] = std::move(ids);
  }
  return out;
}

// A text feature where EOS goes: the step runs before tokenize (seqio's
// append on a string tensor fails in TF; here it skipped the feature, and
// the examples had no EOS).
static void refuse_text(const FeatureValue& v, const std::string& key, const char* step) {
  if (std::holds_alternative<std::string>(v))
    throw std::invalid_argument(std::string("[") + step + "] feature '" + key +
                                "' is still text, so there is no token sequence to end with EOS (hint: put " + step +
                                " after seqio.preprocessors.tokenize)");
}

Example append_eos(const Example& x, const OutputFeatures& output_features) {
  Example out = x;
  for (const auto& [key, feature] : output_features) {
    if (!feature.add_eos) continue;
    auto it = out.find(key);
    if (it == out.end()) continue;
    refuse_text(it->second, key, "append_eos");
    if (auto* t = std::get_if<Tokens>(&it->second))
      t->push_back(eos_id_of(feature, key, "append_eos"));
  }
  return out;
}

Example append_eos_after_trim(const Example& x, const OutputFeatures& output_features,
                              const SequenceLengths& sequence_lengths) {
  Example out = x;
  for (const auto& [key, feature] : output_features) {
    if (!feature.add_eos) continue;
    auto it = out.find(key);
    if (it == out.end()) continue;
    refuse_text(it->second, key, "append_eos_after_trim");
    auto* t = std::get_if<Tokens>(&it->second);
    if (t == nullptr) continue;
    auto len = sequence_lengths.find(key);
    if (len != sequence_lengths.end()) {
      if (len->second < 1)
        throw std::invalid_argument("[append_eos_after_trim] sequence length of '" + key +
                                    "' must be >= 1, got " + std::to_string(len->second));
      if (static_cast<int64_t>(t->size()) > len->second - 1)
        t->resize(static_cast<size_t>(len->second - 1));
    }
    t->push_back(eos_id_of(feature, key, "append_eos_after_trim"));
  }
  return out;
}

Example truncate_inputs_left(const Example& x, const SequenceLengths& sequence_lengths) {
  auto len = sequence_lengths.find("inputs");
  if (len == sequence_lengths.end()) return x;
  Example out = x;
  auto it = out.find("inputs");
  if (it == out.end()) return out;
  auto* t = std::get_if<Tokens>(&it->second);
  if (t == nullptr)
    throw std::invalid_argument("[truncate_inputs_left] feature 'inputs' is not a token sequence");
  const int64_t L = len->second;
  if (L < 0) throw std::invalid_argument("[truncate_inputs_left] negative inputs length");
  if (L > 0 && static_cast<int64_t>(t->size()) > L)
    t->erase(t->begin(), t->end() - L);
  return out;
}

int64_t TrimCounts::total_examples() const {
  int64_t n = 0;
  for (const auto& [k, v] : examples) n += v;
  return n;
}
int64_t TrimCounts::total_tokens() const {
  int64_t n = 0;
  for (const auto& [k, v] : tokens) n += v;
  return n;
}
void TrimCounts::merge(const TrimCounts& other) {
  for (const auto& [k, v] : other.examples) examples[k] += v;
  for (const auto& [k, v] : other.tokens) tokens[k] += v;
}

Example trim_to_lengths(const Example& x, const SequenceLengths& sequence_lengths,
                        TrimCounts* counts) {
  Example out = x;
  for (const auto& [key, L] : sequence_lengths) {
    auto it = out.find(key);
    if (it == out.end()) continue;
    auto* t = std::get_if<Tokens>(&it->second);
    if (t == nullptr) continue;
    if (L < 0) throw std::invalid_argument("[trim_to_lengths] negative length for '" + key + "'");
    if (static_cast<int64_t>(t->size()) > L) {
      if (counts) {
        counts->examples[key] += 1;
        counts->tokens[key] += static_cast<int64_t>(t->size()) - L;
      }
      t->resize(static_cast<size_t>(L));
    }
  }
  return out;
}

}  // namespace seqio::preprocessors
