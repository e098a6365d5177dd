// Vocabularies (seqio/vocabularies.py): text <-> token ids.
//
// Contract shared by all vocabularies, as in seqio:
//  - pad_id() == 0 always;
//  - encode() never adds EOS (tokenize/append_eos preprocessors do that);
//  - decode(ids): (1) when unk_id() is set, every id >= base_vocab_size() is
//    replaced by unk_id(); (2) when eos_id() is set and present, the ids are
//    cut after the first EOS (the EOS itself is kept and then rendered by the
//    vocabulary, i.e. dropped by SentencePiece and ByteVocabulary);
//    (3) the vocabulary-specific decoding.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "seqio/example.h"

namespace sentencepiece { class SentencePieceProcessor; }

namespace seqio {

class Vocabulary {
 public:
  explicit Vocabulary(int extra_ids = 0);
  virtual ~Vocabulary();

  static constexpr int32_t kPadId = 0;
  int32_t pad_id() const { return kPadId; }
  virtual std::optional<int32_t> eos_id() const = 0;
  virtual std::optional<int32_t> unk_id() const = 0;
  int extra_ids() const { return extra_ids_; }
  // Ids of the base vocabulary including PAD/EOS/UNK (seqio `_base_vocab_size`).
  virtual int32_t base_vocab_size() const = 0;
  // base_vocab_size() + extra_ids() (SentencePiece: piece count incl. extras).
  virtual int32_t vocab_size() const { return base_vocab_size() + extra_ids_; }

  virtual Tokens encode(std::string_view text) const = 0;
  std::string decode(const Tokens& ids) const;
  // Steps (1) and (2) of decode() only: the ids the vocabulary will render.
  Tokens clean_ids_for_decode(const Tokens& ids) const;
  // A spec string that make_vocabulary() accepts and that identifies the
  // vocabulary (used for equality, cache info and the CLI).
  virtual std::string spec() const = 0;

  bool operator==(const Vocabulary& o) const { return spec() == o.spec(); }

 protected:
  // Step (3): seqio `_decode`.
  virtual std::string decode_clean(const Tokens& ids) const = 0;

 private:
  int extra_ids_;
};

// SentencePiece model (libsentencepiece). Extra ids are appended to the model
// as user-defined pieces "▁<extra_id_k>" in the order extra_id_{N-1} ...
// extra_id_0 (seqio's reverse_extra_ids=True), so <extra_id_0> =
// vocab_size() - 1 and <extra_id_k> = vocab_size() - 1 - k; the sentinels can
// be typed as text and encode to their ids. The model must reserve 0=PAD,
// 1=EOS, 2=UNK (T5 convention). Decoding: ids >= piece count -> UNK, which
// SentencePiece renders as " ⁇ "; negative ids throw std::invalid_argument.
// Errors: a missing or unreadable model throws std::runtime_error naming the path.
class SentencePieceVocabulary final : public Vocabulary {
 public:
  SentencePieceVocabulary(std::string model_path, int extra_ids = 0, bool reverse_extra_ids = true);
  ~SentencePieceVocabulary() override;

  std::optional<int32_t> eos_id() const override;
  std::optional<int32_t> unk_id() const override;
  int32_t base_vocab_size() const override;  // piece count including extra ids
  int32_t vocab_size() const override { return base_vocab_size(); }
  Tokens encode(std::string_view text) const override;
  std::string spec() const override;
  const std::string& model_path() const { return model_path_; }
  // Piece string of an id ("▁test", "<extra_id_0>" is "▁<extra_id_0>").
  std::string id_to_piece(int32_t id) const;

 protected:
  std::string decode_clean(const Tokens& ids) const override;

 private:
  std::string model_path_;
  bool reverse_extra_ids_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

// ByT5 bytes (seqio ByteVocabulary): id = UTF-8 byte + 3; 0=PAD, 1=EOS,
// 2=UNK; vocab_size = 259 + extra_ids. Decoding keeps ids in [3, 259) and
// decodes UTF-8 dropping invalid sequences (Python errors="ignore"): PAD, EOS,
// UNK and extra ids vanish.
class ByteVocabulary final : public Vocabulary {
 public:
  explicit ByteVocabulary(int extra_ids = 0) : Vocabulary(extra_ids) {}
  static constexpr int32_t kOffset = 3;
  std::optional<int32_t> eos_id() const override { return 1; }
  std::optional<int32_t> unk_id() const override { return 2; }
  int32_t base_vocab_size() const override { return 256 + kOffset; }
  Tokens encode(std::string_view text) const override;
  std::string spec() const override;

 protected:
  std::string decode_clean(const Tokens& ids) const override;
};

// Identity vocabulary over integer ids (seqio PassThroughVocabulary): no UNK,
// optional EOS. Text form: ids written as decimal numbers separated by single
// spaces (encode parses that form; decode writes it).
class PassThroughVocabulary final : public Vocabulary {
 public:
  explicit PassThroughVocabulary(int32_t size, std::optional<int32_t> eos_id = std::nullopt)
      : Vocabulary(0), size_(size), eos_(eos_id) {}
  std::optional<int32_t> eos_id() const override { return eos_; }
  std::optional<int32_t> unk_id() const override { return std::nullopt; }
  int32_t base_vocab_size() const override { return size_; }
  Tokens encode(std::string_view text) const override;
  std::string spec() const override;

 protected:
  std::string decode_clean(const Tokens& ids) const override;

 private:
  int32_t size_;
  std::optional<int32_t> eos_;
};

// Parses "sentencepiece:PATH[:extra_ids=N]", "byte[:extra_ids=N]",
// "passthrough:SIZE[:eos_id=N]". One vocabulary per spec per process (later
// calls return the same object; thread-safe). Throws std::invalid_argument on
// a malformed spec, std::runtime_error when a model file cannot be loaded.
std::shared_ptr<const Vocabulary> make_vocabulary(const std::string& spec);

// Python's bytes.decode("utf-8", errors="ignore"): invalid or truncated
// sequences, surrogates, overlongs and code points > U+10FFFF are dropped.
std::string utf8_decode_ignore(std::string_view bytes);
// Offset of the first invalid UTF-8 byte, or std::nullopt when valid.
std::optional<size_t> first_invalid_utf8(std::string_view bytes);

}  // namespace seqio
