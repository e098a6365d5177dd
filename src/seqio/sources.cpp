#include "seqio/sources.h"

#include <glob.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "seqio/errors.h"
#include "seqio/tfrecord.h"
#include "seqio/vocabularies.h"

namespace seqio {

std::vector<std::string> list_files(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& pat : patterns) {
    std::vector<std::string> files;
    if (pat.find_first_of("*?[") == std::string::npos) {
      files.push_back(pat);
    } else {
      glob_t g{};
      if (::glob(pat.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
      globfree(&g);
      if (files.empty())
        throw DataError("No file is found for the file pattern '" + pat + "' (hint: check the path "
                        "relative to the working directory)");
      std::sort(files.begin(), files.end());
    }
    for (auto& f : files)
      if (seen.insert(f).second) out.push_back(f);
  }
  return out;
}

// ---------------------------------------------------------------- in memory

namespace {
class VectorReader : public RecordReader {
 public:
  VectorReader(std::shared_ptr<const std::map<std::string, std::vector<Example>>> data, const std::vector<Example>* v)
      : data_(std::move(data)), v_(v) {}
  bool next(Example& out) override {
    if (i_ >= v_->size()) return false;
    out = (*v_)[i_++];
    return true;
  }

 private:
  std::shared_ptr<const std::map<std::string, std::vector<Example>>> data_;  // keeps v_ alive
  const std::vector<Example>* v_;
  size_t i_ = 0;
};
}  // namespace

InMemoryDataSource::InMemoryDataSource(std::map<std::string, std::vector<Example>> d)
    : data_(std::make_shared<const std::map<std::string, std::vector<Example>>>(std::move(d))) {}

std::vector<std::string> InMemoryDataSource::splits() const {
  std::vector<std::string> s;
  for (const auto& [k, v] : *data_) s.push_back(k);
  return s;
}
std::vector<std::string> InMemoryDataSource::list_shards(const std::string& split) const {
  if (!data_->count(split)) throw DataError("in-memory source has no split '" + split + "'");
  return {"memory:" + split};
}
std::unique_ptr<RecordReader> InMemoryDataSource::open_shard(const std::string& split, size_t) const {
  auto it = data_->find(split);
  if (it == data_->end()) throw DataError("in-memory source has no split '" + split + "'");
  return std::make_unique<VectorReader>(data_, &it->second);
}
std::optional<int64_t> InMemoryDataSource::num_input_examples(const std::string& split) const {
  auto it = data_->find(split);
  return it == data_->end() ? std::nullopt : std::optional<int64_t>(it->second.size());
}

// ---------------------------------------------------------------- files

FileDataSource::FileDataSource(std::map<std::string, std::vector<std::string>> p, std::optional<int64_t> n)
    : patterns_(std::move(p)), num_examples_(n) {}

std::vector<std::string> FileDataSource::splits() const {
  std::vector<std::string> s;
  for (const auto& [k, v] : patterns_) s.push_back(k);
  return s;
}
std::vector<std::string> FileDataSource::list_shards(const std::string& split) const {
  auto it = patterns_.find(split);
  if (it == patterns_.end()) {
    std::string have;
    for (const auto& [k, v] : patterns_) have += (have.empty() ? "" : ", ") + k;
    throw DataError("source has no split '" + split + "' (its splits: " + have + ")");
  }
  return list_files(it->second);
}
std::unique_ptr<RecordReader> FileDataSource::open_shard(const std::string& split, size_t shard) const {
  auto files = list_shards(split);
  if (shard >= files.size()) throw std::invalid_argument("[FileDataSource::open_shard] shard out of range");
  return open_file(files[shard]);
}

namespace {
// Line reader with 1-based line numbers and UTF-8 validation.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw DataError(path + ": cannot open file");
  }
  bool next(std::string& line) {
    if (!std::getline(in_, line)) return false;
    ++line_no_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // A UTF-8 byte order mark (as some editors and spreadsheets save) is not
    // text: left in, it became part of the first field and was tokenized.
    if (line_no_ == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (auto bad = first_invalid_utf8(line))
      throw line_error(path_, line_no_, "invalid UTF-8 at column " + std::to_string(*bad + 1) +
                                            " (hint: convert the file to UTF-8)");
    return true;
  }
  int64_t line_no() const { return line_no_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t line_no_ = 0;
};

class TextLineReader : public RecordReader {
 public:
  TextLineReader(const std::string& path, int skip) : r_(path), skip_(skip) {}
  bool next(Example& out) override {
    std::string line;
    while (r_.next(line)) {
      if (r_.line_no() <= skip_) continue;
      out.clear();
      out["text"] = std::move(line);
      return true;
    }
    return false;
  }

 private:
  LineReader r_;
  int skip_;
};

class TsvReader : public RecordReader {
 public:
  TsvReader(const std::string& path, const std::vector<std::string>& fields, int skip)
      : r_(path), fields_(fields), skip_(skip) {}
  bool next(Example& out) override {
    std::string line;
    while (r_.next(line)) {
      if (r_.line_no() <= skip_) continue;
      if (line.empty()) throw line_error(r_.path(), r_.line_no(), "empty line (hint: remove blank lines)");
      std::vector<std::string> cols;
      size_t start = 0;
      for (;;) {
        size_t tab = line.find('\t', start);
        cols.push_back(line.substr(start, tab - start));
        if (tab == std::string::npos) break;
        start = tab + 1;
      }
      if (cols.size() != fields_.size())
        throw line_error(r_.path(), r_.line_no(),
                         "expected " + std::to_string(fields_.size()) + " tab-separated columns, found " +
                             std::to_string(cols.size()));
      out.clear();
      for (size_t i = 0; i < cols.size(); ++i) out[fields_[i]] = std::move(cols[i]);
      return true;
    }
    return false;
  }

 private:
  LineReader r_;
  std::vector<std::string> fields_;
  int skip_;
};

// JSON value -> FeatureValue of the wanted dtype (or the natural one).
FeatureValue json_to_value(const nlohmann::json& j, std::optional<DType> want, const std::string& key) {
  auto fail = [&](const std::string& why) { return std::runtime_error("field '" + key + "' " + why); };
  if (j.is_string()) {
    if (want && *want != DType::kString) throw fail("is a string, expected " + std::string(dtype_name(*want)));
    return j.get<std::string>();
  }
  if (j.is_number_integer()) {
    if (!want || *want == DType::kInt64) return j.get<int64_t>();
    if (*want == DType::kFloat64) return j.get<double>();
    throw fail("is an integer, expected " + std::string(dtype_name(*want)));
  }
  if (j.is_number()) {
    if (!want || *want == DType::kFloat64) return j.get<double>();
    throw fail("is a number, expected " + std::string(dtype_name(*want)));
  }
  if (j.is_array()) {
    if (want && *want != DType::kInt32) throw fail("is an array, expected " + std::string(dtype_name(*want)));
    Tokens t;
    t.reserve(j.size());
    for (const auto& e : j) {
      if (!e.is_number_integer()) throw fail("must be an array of integer token ids");
      int64_t v = e.get<int64_t>();
      if (v < INT32_MIN || v > INT32_MAX) throw fail("has a token id outside int32");
      t.push_back(static_cast<int32_t>(v));
    }
    return t;
  }
  throw fail("has an unsupported JSON type (string, number or array of ints expected)");
}

class JsonlReader : public RecordReader {
 public:
  JsonlReader(const std::string& path, const std::map<std::string, DType>& fields) : r_(path), fields_(fields) {}
  bool next(Example& out) override {
    std::string line;
    if (!r_.next(line)) return false;
    if (line.empty()) throw line_error(r_.path(), r_.line_no(), "empty line (hint: remove blank lines)");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // syntax, or a number past double's range
      throw line_error(r_.path(), r_.line_no(), std::string("invalid JSON: ") + e.what());
    }
    if (!j.is_object()) throw line_error(r_.path(), r_.line_no(), "expected a JSON object");
    out.clear();
    try {
      if (fields_.empty()) {
        for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = json_to_value(it.value(), std::nullopt, it.key());
      } else {
        for (const auto& [name, dtype] : fields_) {
          auto it = j.find(name);
          if (it == j.end())
            throw std::runtime_error("missing field '" + name + "' (hint: every line needs it)");
          out[name] = json_to_value(*it, dtype, name);
        }
      }
    } catch (const std::runtime_error& e) {
      throw line_error(r_.path(), r_.line_no(), e.what());
    }
    return true;
  }

 private:
  LineReader r_;
  const std::map<std::string, DType>& fields_;
};

class TFExampleReader : public RecordReader {
 public:
  TFExampleReader(const std::string& path, const std::map<std::string, DType>& desc) : r_(path), desc_(desc) {}
  bool next(Example& out) override {
    const uint64_t offset = r_.offset();
    if (!r_.next(buf_)) return false;
    TFExample tf;
    try {
      tf = parse_tf_example(buf_);
    } catch (const std::runtime_error& e) {
      throw offset_error(r_.path(), offset, std::string("malformed tf.Example: ") + e.what());
    }
    out.clear();
    try {
      if (desc_.empty()) {
        for (auto& [k, f] : tf) out[k] = convert(f, std::nullopt, k);
      } else {
        for (const auto& [name, dtype] : desc_) {
          // (an init-capture: clang before 16 cannot capture structured bindings)
          auto it = std::find_if(tf.begin(), tf.end(), [&n = name](const auto& p) { return p.first == n; });
          if (it == tf.end()) throw std::runtime_error("missing feature '" + name + "'");
          out[name] = convert(it->second, dtype, name);
        }
      }
    } catch (const std::runtime_error& e) {
      throw offset_error(r_.path(), offset, e.what());
    }
    return true;
  }

 private:
  static FeatureValue convert(const TFFeature& f, std::optional<DType> want, const std::string& key) {
    using K = TFFeature::Kind;
    auto one = [&](size_t n) {
      if (n != 1) throw std::runtime_error("feature '" + key + "' has " + std::to_string(n) + " values, expected 1");
    };
    DType d = want ? *want : f.kind == K::kInt64 ? DType::kInt32 : f.kind == K::kFloat ? DType::kFloat64 : DType::kString;
    switch (d) {
      case DType::kInt32: {
        if (f.kind != K::kInt64 && !(f.ints.empty() && f.bytes.empty() && f.floats.empty()))
          throw std::runtime_error("feature '" + key + "' is not an int64 list");
        Tokens t;
        for (int64_t v : f.ints) {
          if (v < INT32_MIN || v > INT32_MAX) throw std::runtime_error("feature '" + key + "' has an id outside int32");
          t.push_back(static_cast<int32_t>(v));
        }
        return t;
      }
      case DType::kInt64:
        if (f.kind != K::kInt64) throw std::runtime_error("feature '" + key + "' is not an int64 list");
        one(f.ints.size());
        return f.ints[0];
      case DType::kFloat64:
        if (f.kind != K::kFloat) throw std::runtime_error("feature '" + key + "' is not a float list");
        one(f.floats.size());
        return static_cast<double>(f.floats[0]);
      case DType::kString:
        if (f.kind != K::kBytes) throw std::runtime_error("feature '" + key + "' is not a bytes list");
        one(f.bytes.size());
        return f.bytes[0];
    }
    return {};
  }
  TFRecordReader r_;
  const std::map<std::string, DType>& desc_;
  std::string buf_;
};
}  // namespace

TextLineDataSource::TextLineDataSource(std::map<std::string, std::vector<std::string>> p, int skip,
                                       std::optional<int64_t> n)
    : FileDataSource(std::move(p), n), skip_header_lines_(skip) {}
std::unique_ptr<RecordReader> TextLineDataSource::open_file(const std::string& path) const {
  return std::make_unique<TextLineReader>(path, skip_header_lines_);
}

TsvDataSource::TsvDataSource(std::map<std::string, std::vector<std::string>> p, std::vector<std::string> fields,
                             int skip)
    : FileDataSource(std::move(p)), fields_(std::move(fields)), skip_header_lines_(skip) {
  if (fields_.empty()) throw std::invalid_argument("[TsvDataSource] field_names must not be empty");
}
std::unique_ptr<RecordReader> TsvDataSource::open_file(const std::string& path) const {
  return std::make_unique<TsvReader>(path, fields_, skip_header_lines_);
}

JsonlDataSource::JsonlDataSource(std::map<std::string, std::vector<std::string>> p, std::map<std::string, DType> f)
    : FileDataSource(std::move(p)), fields_(std::move(f)) {}
std::unique_ptr<RecordReader> JsonlDataSource::open_file(const std::string& path) const {
  return std::make_unique<JsonlReader>(path, fields_);
}

TFExampleDataSource::TFExampleDataSource(std::map<std::string, std::vector<std::string>> p,
                                         std::map<std::string, DType> d)
    : FileDataSource(std::move(p)), description_(std::move(d)) {}
std::unique_ptr<RecordReader> TFExampleDataSource::open_file(const std::string& path) const {
  return std::make_unique<TFExampleReader>(path, description_);
}

}  // namespace seqio
