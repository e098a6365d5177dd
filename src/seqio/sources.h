// DataSources (seqio/dataset_providers.py): where a Task's raw examples come
// from.
//
// A source exposes, per split, an ordered list of shards (for file sources:
// the files, non-glob patterns verbatim, globs expanded, de-duplicated and
// sorted, as seqio's utils.list_files) and a reader per shard. Sharding over
// hosts is decided by the pipeline (dataset.h), as seqio's Task does: by file
// when #files >= #shards, otherwise example by example.
//
// Errors: malformed input throws DataError naming the file and the line
// (text formats) or byte offset (TFRecord): invalid UTF-8, an empty line in
// JSONL/TSV, a missing JSONL field, a wrong TSV column count, a corrupted
// TFRecord CRC. No file matching a pattern -> DataError "No file is found".
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "seqio/example.h"
#include "seqio/feature.h"

namespace seqio {

// Reads the records of one shard in order.
class RecordReader {
 public:
  virtual ~RecordReader() = default;
  // False at the end. Throws DataError on malformed data.
  virtual bool next(Example& out) = 0;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual std::vector<std::string> splits() const = 0;
  // Shard names of a split (files, sorted). Throws DataError for an unknown
  // split or when no file matches.
  virtual std::vector<std::string> list_shards(const std::string& split) const = 0;
  virtual std::unique_ptr<RecordReader> open_shard(const std::string& split, size_t shard) const = 0;
  virtual std::optional<int64_t> num_input_examples(const std::string& split) const { return std::nullopt; }
  virtual bool caching_permitted() const { return true; }
};

// seqio.utils.list_files over several patterns (glob(3) syntax).
std::vector<std::string> list_files(const std::vector<std::string>& patterns);

// In-memory examples (seqio FunctionDataSource over a fixed list): one shard.
class InMemoryDataSource : public DataSource {
 public:
  explicit InMemoryDataSource(std::map<std::string, std::vector<Example>> split_to_examples);
  std::vector<std::string> splits() const override;
  std::vector<std::string> list_shards(const std::string& split) const override;
  std::unique_ptr<RecordReader> open_shard(const std::string& split, size_t shard) const override;
  std::optional<int64_t> num_input_examples(const std::string& split) const override;

 private:
  std::shared_ptr<const std::map<std::string, std::vector<Example>>> data_;
};

// Base of file sources: split -> list of file patterns.
class FileDataSource : public DataSource {
 public:
  explicit FileDataSource(std::map<std::string, std::vector<std::string>> split_to_filepattern,
                          std::optional<int64_t> num_input_examples = std::nullopt);
  std::vector<std::string> splits() const override;
  std::vector<std::string> list_shards(const std::string& split) const override;
  std::unique_ptr<RecordReader> open_shard(const std::string& split, size_t shard) const override;
  std::optional<int64_t> num_input_examples(const std::string& split) const override { return num_examples_; }

 protected:
  virtual std::unique_ptr<RecordReader> open_file(const std::string& path) const = 0;

 private:
  std::map<std::string, std::vector<std::string>> patterns_;
  std::optional<int64_t> num_examples_;
};

// One example per line: {"text": line} (seqio TextLineDataSource). Empty
// lines are kept as empty strings, as seqio does; the first
// skip_header_lines lines of every file are skipped. Lines must be UTF-8.
class TextLineDataSource : public FileDataSource {
 public:
  TextLineDataSource(std::map<std::string, std::vector<std::string>> split_to_filepattern,
                     int skip_header_lines = 0, std::optional<int64_t> num_input_examples = std::nullopt);

 protected:
  std::unique_ptr<RecordReader> open_file(const std::string& path) const override;

 private:
  int skip_header_lines_;
};

// Tab-separated values: every line has exactly field_names.size() columns,
// each becomes a string feature. Empty lines are errors.
class TsvDataSource : public FileDataSource {
 public:
  TsvDataSource(std::map<std::string, std::vector<std::string>> split_to_filepattern,
                std::vector<std::string> field_names, int skip_header_lines = 0);

 protected:
  std::unique_ptr<RecordReader> open_file(const std::string& path) const override;

 private:
  std::vector<std::string> fields_;
  int skip_header_lines_;
};

// JSON Lines: one object per line. `fields` (name -> dtype) are required
// and converted: string -> string, integer -> int64, number -> float64, array
// of integers -> int32 tokens; other keys are ignored. An empty `fields`
// keeps every key with the natural conversion. Empty lines are errors.
class JsonlDataSource : public FileDataSource {
 public:
  JsonlDataSource(std::map<std::string, std::vector<std::string>> split_to_filepattern,
                  std::map<std::string, DType> fields = {});

 protected:
  std::unique_ptr<RecordReader> open_file(const std::string& path) const override;

 private:
  std::map<std::string, DType> fields_;
};

// TFRecord files of tf.train.Example (seqio TFExampleDataSource).
// feature_description: name -> dtype; int64 lists become int32 tokens for
// kInt32 (a VarLenFeature) or a scalar for kInt64; kString/kFloat64 take the
// single value. Declared features must be present. An empty description
// keeps every feature (int64 -> tokens, one bytes value -> string, one float
// -> float64).
class TFExampleDataSource : public FileDataSource {
 public:
  TFExampleDataSource(std::map<std::string, std::vector<std::string>> split_to_filepattern,
                      std::map<std::string, DType> feature_description = {});

 protected:
  std::unique_ptr<RecordReader> open_file(const std::string& path) const override;

 private:
  std::map<std::string, DType> description_;
};

}  // namespace seqio
