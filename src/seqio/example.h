// The unit of data that flows through a seqio pipeline.
//
// As in seqio (which passes dicts of tf.Tensors), an Example maps feature names
// to values: text (e.g. "inputs_pretokenized"), token ids (e.g. "targets" after
// tokenization, int32 as seqio's default output dtype), or scalars (e.g. an
// example index). std::map keeps a stable key order, so JSONL output and
// hashes are deterministic.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace seqio {

using Tokens = std::vector<int32_t>;
using FeatureValue = std::variant<std::string, Tokens, int64_t, double>;
using Example = std::map<std::string, FeatureValue>;

// Typed access; throws std::invalid_argument naming the feature when it is
// missing or holds another type.
inline const Tokens& get_tokens(const Example& ex, const std::string& key) {
  auto it = ex.find(key);
  if (it == ex.end()) throw std::invalid_argument("[seqio] example has no feature '" + key + "'");
  if (auto* t = std::get_if<Tokens>(&it->second)) return *t;
  throw std::invalid_argument("[seqio] feature '" + key + "' is not a token sequence");
}
inline const std::string& get_text(const Example& ex, const std::string& key) {
  auto it = ex.find(key);
  if (it == ex.end()) throw std::invalid_argument("[seqio] example has no feature '" + key + "'");
  if (auto* s = std::get_if<std::string>(&it->second)) return *s;
  throw std::invalid_argument("[seqio] feature '" + key + "' is not text");
}

}  // namespace seqio
