// Output feature declarations of a seqio Task (seqio/utils.py `Feature`).
//
// A Feature names the vocabulary that tokenizes it, whether an EOS belongs at
// its end (declaring add_eos adds nothing by itself: a preprocessor such as
// append_eos reads it), whether it must be present, and its dtype/rank.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "seqio/example.h"
#include "seqio/vocabularies.h"

namespace seqio {

// Which FeatureValue alternative a feature holds once preprocessed.
// kInt32 rank 1 = Tokens (seqio's default); kString/kInt64/kFloat64 are rank-0
// (a single string, int64_t or double).
enum class DType { kInt32, kInt64, kFloat64, kString };
const char* dtype_name(DType d);                  // "int32", "int64", "float64", "string"
DType dtype_from_name(const std::string& name);   // throws std::invalid_argument

struct Feature {
  std::shared_ptr<const Vocabulary> vocabulary;   // required for kInt32 features
  bool add_eos = true;
  bool required = true;
  DType dtype = DType::kInt32;
  int rank = 1;
};

// Stored sorted by name, as seqio sorts Task.output_features.
using OutputFeatures = std::map<std::string, Feature>;

// Per-feature maximum lengths in tokens ("inputs" -> 512). A feature that is
// absent has no length (seqio's None): it is neither trimmed nor checked.
using SequenceLengths = std::map<std::string, int>;

// The longest feature length the programs accept (2^20 tokens; LongT5 trains
// at 16k): a longer one is a typo whose buffers would not fit in memory (a
// 2e9 length ran into the kernel's out-of-memory killer with no message).
inline constexpr int kMaxSequenceLength = 1 << 20;

// Does the value's variant alternative match the declared dtype?
bool value_matches(const FeatureValue& v, DType d);

}  // namespace seqio
