#include "seqio/vocabularies.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace seqio {

Vocabulary::Vocabulary(int extra_ids) : extra_ids_(extra_ids) {
  if (extra_ids < 0) throw std::invalid_argument("[Vocabulary] extra_ids must be >= 0");
  // T5 uses 100 sentinels; a count past this is a typo that used to build a
  // model proto of gigabytes (and abort in protobuf).
  constexpr int kMaxExtraIds = 1 << 20;
  if (extra_ids > kMaxExtraIds)
    throw std::invalid_argument("[Vocabulary] extra_ids = " + std::to_string(extra_ids) + " is more than " +
                                std::to_string(kMaxExtraIds) + " (T5 uses 100)");
}
Vocabulary::~Vocabulary() = default;

Tokens Vocabulary::clean_ids_for_decode(const Tokens& ids) const {
  Tokens out = ids;
  if (auto unk = unk_id()) {
    const int32_t base = base_vocab_size();
    for (auto& i : out)
      if (i >= base) i = *unk;
  }
  if (auto eos = eos_id()) {
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k] == *eos) {
        out.resize(k + 1);  // keep the EOS itself, as seqio does
        break;
      }
    }
  }
  return out;
}

std::string Vocabulary::decode(const Tokens& ids) const { return decode_clean(clean_ids_for_decode(ids)); }

// ---------------------------------------------------------------- UTF-8

// Length of the valid UTF-8 sequence starting at s[i], or 0 when invalid
// (Unicode table 3-7: well-formed byte sequences).
static size_t utf8_seq_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const size_t n = s.size() - i;
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return k < s.size() && b(k) >= lo && b(k) <= hi;
  };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return n >= 2 && cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

std::string utf8_decode_ignore(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t n = utf8_seq_len(bytes, i);
    if (n == 0) {
      ++i;  // dropping byte by byte equals dropping maximal subparts: a
            // continuation byte can never start a valid sequence
      continue;
    }
    out.append(bytes.substr(i, n));
    i += n;
  }
  return out;
}

std::optional<size_t> first_invalid_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    size_t n = utf8_seq_len(bytes, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- SentencePiece

namespace {
// Appends one `pieces` entry (ModelProto field 1) to a serialized ModelProto.
// Repeated fields may be appended by concatenation in the protobuf wire
// format, so the extra ids become the last pieces, in the order added.
void append_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}
void append_user_defined_piece(std::string& proto, const std::string& piece) {
  std::string msg;
  msg.push_back(0x0A);  // field 1 (piece), length-delimited
  append_varint(msg, piece.size());
  msg += piece;
  msg.push_back(0x15);  // field 2 (score), fixed32 float 0.0
  msg.append(4, '\0');
  msg.push_back(0x18);  // field 3 (type), varint: USER_DEFINED = 4
  msg.push_back(4);
  proto.push_back(0x0A);  // ModelProto field 1 (pieces)
  append_varint(proto, msg.size());
  proto += msg;
}
}  // namespace

SentencePieceVocabulary::SentencePieceVocabulary(std::string model_path, int extra_ids,
                                                 bool reverse_extra_ids)
    : Vocabulary(extra_ids), model_path_(std::move(model_path)), reverse_extra_ids_(reverse_extra_ids),
      sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::ifstream f(model_path_, std::ios::binary);
  if (!f)
    throw std::runtime_error("SentencePiece model '" + model_path_ +
                             "' cannot be opened (hint: check the path given with --vocab or the Task)");
  std::ostringstream buf;
  buf << f.rdbuf();
  std::string proto = buf.str();
  // (A directory opens as a stream with nothing in it.)
  if (proto.empty())
    throw std::runtime_error("SentencePiece model '" + model_path_ + "' is " +
                             (std::filesystem::is_directory(model_path_) ? "a directory" : "an empty file") +
                             " (hint: point --vocab or the Task at the .model file spm_train wrote)");
  const size_t file_bytes = proto.size();
  for (int k = 0; k < extra_ids; ++k) {
    int idx = reverse_extra_ids ? extra_ids - 1 - k : k;
    append_user_defined_piece(proto, "\xE2\x96\x81<extra_id_" + std::to_string(idx) + ">");
  }
  auto st = sp_->LoadFromSerializedProto(proto);
  if (!st.ok())
    throw std::runtime_error("SentencePiece model '" + model_path_ + "' cannot be loaded: " + st.ToString() +
                             " (hint: its " + std::to_string(file_bytes) +
                             " bytes are truncated or not a SentencePiece model; point --vocab or the Task at the .model file spm_train wrote)");
}
SentencePieceVocabulary::~SentencePieceVocabulary() = default;

std::optional<int32_t> SentencePieceVocabulary::eos_id() const {
  int e = sp_->eos_id();
  return e < 0 ? std::nullopt : std::optional<int32_t>(e);
}
std::optional<int32_t> SentencePieceVocabulary::unk_id() const { return sp_->unk_id(); }
int32_t SentencePieceVocabulary::base_vocab_size() const { return sp_->GetPieceSize(); }

Tokens SentencePieceVocabulary::encode(std::string_view text) const {
  std::vector<int> ids;
  auto st = sp_->Encode(text, &ids);
  if (!st.ok()) throw std::runtime_error("SentencePiece encode failed: " + st.ToString());
  return Tokens(ids.begin(), ids.end());
}

std::string SentencePieceVocabulary::decode_clean(const Tokens& ids) const {
  std::vector<int> v;
  v.reserve(ids.size());
  const int n = sp_->GetPieceSize();
  for (int32_t i : ids) {
    if (i < 0)
      throw std::invalid_argument("[SentencePieceVocabulary::decode] negative id " + std::to_string(i));
    v.push_back(i >= n ? sp_->unk_id() : i);
  }
  std::string out;
  auto st = sp_->Decode(v, &out);
  if (!st.ok()) throw std::runtime_error("SentencePiece decode failed: " + st.ToString());
  return out;
}

std::string SentencePieceVocabulary::id_to_piece(int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize())
    throw std::invalid_argument("[SentencePieceVocabulary::id_to_piece] id out of range");
  return sp_->IdToPiece(id);
}

std::string SentencePieceVocabulary::spec() const {
  std::string s = "sentencepiece:" + model_path_;
  if (extra_ids() > 0) s += ":extra_ids=" + std::to_string(extra_ids());
  if (!reverse_extra_ids_) s += ":reverse_extra_ids=false";
  return s;
}

// ---------------------------------------------------------------- Byte

Tokens ByteVocabulary::encode(std::string_view text) const {
  Tokens out;
  out.reserve(text.size());
  for (char c : text) out.push_back(static_cast<unsigned char>(c) + kOffset);
  return out;
}

std::string ByteVocabulary::decode_clean(const Tokens& ids) const {
  std::string bytes;
  bytes.reserve(ids.size());
  for (int32_t i : ids)
    if (i >= kOffset && i < 256 + kOffset) bytes.push_back(static_cast<char>(i - kOffset));
  return utf8_decode_ignore(bytes);
}

std::string ByteVocabulary::spec() const {
  return extra_ids() > 0 ? "byte:extra_ids=" + std::to_string(extra_ids()) : std::string("byte");
}

// ---------------------------------------------------------------- PassThrough

Tokens PassThroughVocabulary::encode(std::string_view text) const {
  Tokens out;
  std::string s(text);
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size())
      throw std::invalid_argument("[PassThroughVocabulary::encode] '" + tok + "' is not an integer id");
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      throw std::invalid_argument("[PassThroughVocabulary::encode] id " + tok + " is outside the int32 range of ids");
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

std::string PassThroughVocabulary::decode_clean(const Tokens& ids) const {
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k) out.push_back(' ');
    out += std::to_string(ids[k]);
  }
  return out;
}

std::string PassThroughVocabulary::spec() const {
  std::string s = "passthrough:" + std::to_string(size_);
  if (eos_) s += ":eos_id=" + std::to_string(*eos_);
  return s;
}

// ---------------------------------------------------------------- factory

namespace {
int parse_int_opt(const std::string& spec, const std::string& kv, const std::string& key) {
  if (kv.rfind(key + "=", 0) != 0)
    throw std::invalid_argument("[make_vocabulary] unknown option '" + kv + "' in '" + spec + "'");
  try {
    size_t used = 0;
    int v = std::stoi(kv.substr(key.size() + 1), &used);
    if (used == kv.size() - key.size() - 1) return v;
  } catch (const std::out_of_range&) {
    throw std::invalid_argument("[make_vocabulary] '" + kv + "' in '" + spec + "' is out of range (at most " +
                                std::to_string(std::numeric_limits<int>::max()) + ")");
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("[make_vocabulary] '" + kv + "' in '" + spec + "' needs an integer");
}
}  // namespace

namespace {
std::shared_ptr<const Vocabulary> parse_vocabulary(const std::string& spec) {
  auto colon = spec.find(':');
  std::string kind = spec.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "byte") {
    int extra = rest.empty() ? 0 : parse_int_opt(spec, rest, "extra_ids");
    return std::make_shared<ByteVocabulary>(extra);
  }
  if (kind == "sentencepiece") {
    // PATH may itself contain ':'; options are trailing ':key=value' parts.
    int extra = 0;
    bool reverse = true;
    for (;;) {
      auto c = rest.rfind(':');
      if (c == std::string::npos) break;
      std::string opt = rest.substr(c + 1);
      if (opt.rfind("extra_ids=", 0) == 0) {
        extra = parse_int_opt(spec, opt, "extra_ids");
      } else if (opt == "reverse_extra_ids=false") {
        reverse = false;
      } else {
        break;
      }
      rest = rest.substr(0, c);
    }
    if (rest.empty()) throw std::invalid_argument("[make_vocabulary] '" + spec + "' names no model file");
    return std::make_shared<SentencePieceVocabulary>(rest, extra, reverse);
  }
  if (kind == "passthrough") {
    auto c = rest.find(':');
    std::string size_s = rest.substr(0, c);
    int size = parse_int_opt(spec, "size=" + size_s, "size");
    if (size < 1)
      throw std::invalid_argument("[make_vocabulary] '" + spec + "': size must be >= 1, got " + std::to_string(size) +
                                  " (hint: passthrough:SIZE, SIZE the number of token ids)");
    std::optional<int32_t> eos;
    if (c != std::string::npos) eos = parse_int_opt(spec, rest.substr(c + 1), "eos_id");
    return std::make_shared<PassThroughVocabulary>(size, eos);
  }
  throw std::invalid_argument("[make_vocabulary] unknown vocabulary '" + spec +
                              "' (expected sentencepiece:PATH[:extra_ids=N], byte[:extra_ids=N] or "
                              "passthrough:SIZE[:eos_id=N])");
}
}  // namespace

std::shared_ptr<const Vocabulary> make_vocabulary(const std::string& spec) {
  // Vocabularies are immutable, so one per spec serves every task that names
  // it (seqio likewise loads each SentencePiece model once).
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Vocabulary>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto& v = made[spec];
  if (!v) v = parse_vocabulary(spec);
  return v;
}

}  // namespace seqio
