// Converted, batched example streams with a resumable position: the tail of
// seqio.get_dataset (feature converter, then batch(drop_remainder=True)) for
// a trainer that checkpoints its input position.
//
// The converter (e.g. a seqio FeatureConverter with packing) is applied to
// consecutive windows of `window` input examples, as seqio's packing groups
// examples; for packing converters pass a multiple of their packing window so
// that windowed conversion equals converting the whole stream. Rows are then
// grouped into batches of batch_size.
//
// BatchPosition = (position of the input stream where the current window
// starts, rows of that window already consumed, batches emitted). Resuming
// from it re-reads one window and skips the consumed rows, so the batches
// after a restart equal those of the uninterrupted run (t5x/seqio paper
// §3.2 "resume at step x batch").
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "seqio/dataset.h"

namespace seqio {

using ConvertFn = std::function<std::vector<Example>(const std::vector<Example>& window)>;
// Builds the input stream, from its start (nullopt) or from a saved position.
using InputFactory = std::function<std::unique_ptr<Dataset>(const std::optional<Position>& resume)>;

struct BatchPosition {
  Position input;          // input position at the start of the current window
  int64_t rows = 0;        // rows of that window already emitted
  int64_t batches = 0;     // batches emitted so far
  bool operator==(const BatchPosition&) const = default;
};
std::string batch_position_to_json(const BatchPosition& p);
// Throws DataError "<origin>: ..." naming the field (see position_from_json).
BatchPosition batch_position_from_json(const std::string& json, const std::string& origin = "batch position");

class BatchedDataset {
 public:
  // Throws std::invalid_argument for window < 1 or batch_size < 1.
  BatchedDataset(InputFactory make_input, ConvertFn convert, int64_t window, int batch_size,
                 bool drop_remainder = true, std::optional<BatchPosition> resume = std::nullopt);
  // Next batch of batch_size rows (fewer only at the end when
  // drop_remainder is false); false at the end.
  bool next(std::vector<Example>& batch);
  // Position after the last batch returned.
  BatchPosition position() const { return pos_; }

 private:
  bool fill_window();
  std::unique_ptr<Dataset> input_;
  ConvertFn convert_;
  int64_t window_;
  int batch_size_;
  bool drop_remainder_;
  std::vector<Example> rows_;  // converted rows of the current window
  size_t next_row_ = 0;
  bool input_done_ = false;
  BatchPosition pos_;
  Position next_window_start_;
};

// Convenience: a task or mixture by name (mixture.h get_dataset) under
// `options` (whose start/resume are managed here).
std::unique_ptr<BatchedDataset> get_batched_dataset(const std::string& mixture_or_task, DatasetOptions options,
                                                    ConvertFn convert, int64_t window, int batch_size,
                                                    bool drop_remainder = true,
                                                    std::optional<BatchPosition> resume = std::nullopt);

}  // namespace seqio
