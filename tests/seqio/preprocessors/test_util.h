// Helpers shared by the seqio preprocessor tests.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "seqio/feature.h"
#include "seqio/vocabularies.h"

namespace seqio::test {

// A vocabulary that maps whole strings to fixed ids (like seqio's mock
// vocabularies in preprocessors_test.py). Unknown text throws.
class TableVocabulary final : public Vocabulary {
 public:
  TableVocabulary(std::map<std::string, Tokens> table, int32_t size, std::optional<int32_t> eos)
      : Vocabulary(0), table_(std::move(table)), size_(size), eos_(eos) {}
  std::optional<int32_t> eos_id() const override { return eos_; }
  std::optional<int32_t> unk_id() const override { return std::nullopt; }
  int32_t base_vocab_size() const override { return size_; }
  Tokens encode(std::string_view text) const override {
    auto it = table_.find(std::string(text));
    if (it == table_.end()) throw std::invalid_argument("no ids for '" + std::string(text) + "'");
    return it->second;
  }
  std::string spec() const override { return "table:" + std::to_string(size_); }

 protected:
  std::string decode_clean(const Tokens&) const override { return ""; }

 private:
  std::map<std::string, Tokens> table_;
  int32_t size_;
  std::optional<int32_t> eos_;
};

inline Feature feature(std::shared_ptr<const Vocabulary> v, bool add_eos = true) {
  Feature f;
  f.vocabulary = std::move(v);
  f.add_eos = add_eos;
  return f;
}

}  // namespace seqio::test
