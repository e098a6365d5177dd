#include "seqio/batching.h"

#include <nlohmann/json.hpp>

#include "seqio/errors.h"
#include "seqio/json_io.h"
#include "seqio/mixture.h"

namespace seqio {

std::string batch_position_to_json(const BatchPosition& p) {
  nlohmann::json j = {{"input", nlohmann::json::parse(position_to_json(p.input))}, {"rows", p.rows},
                      {"batches", p.batches}};
  return j.dump();
}

BatchPosition batch_position_from_json(const std::string& s, const std::string& origin) {
  const auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw DataError(origin + ": malformed batch position JSON (hint: expected {\"input\": {...}, \"rows\": .., "
                    "\"batches\": ..})");
  auto input = j.find("input");
  if (input == j.end()) throw DataError(origin + ": field 'input' is missing");
  BatchPosition p;
  p.input = position_from_json(input->dump(), origin + " (field 'input')");
  p.rows = json_count_field(j, "rows", origin, "rows");
  p.batches = json_count_field(j, "batches", origin, "batches");
  return p;
}

BatchedDataset::BatchedDataset(InputFactory make_input, ConvertFn convert, int64_t window, int batch_size,
                               bool drop_remainder, std::optional<BatchPosition> resume)
    : convert_(std::move(convert)), window_(window), batch_size_(batch_size), drop_remainder_(drop_remainder) {
  if (window < 1 || batch_size < 1) throw std::invalid_argument("[BatchedDataset] window and batch_size must be >= 1");
  if (resume) {
    input_ = make_input(resume->input);
    pos_ = *resume;
    next_window_start_ = resume->input;
    if (fill_window()) next_row_ = std::min<size_t>(rows_.size(), static_cast<size_t>(resume->rows));
    pos_.rows = static_cast<int64_t>(next_row_);
  } else {
    input_ = make_input(std::nullopt);
    next_window_start_ = input_->position();
  }
}

// Converts the next window; pos_.input becomes its start.
bool BatchedDataset::fill_window() {
  rows_.clear();
  next_row_ = 0;
  while (rows_.empty()) {
    if (input_done_) return false;
    std::vector<Example> in;
    const Position start = next_window_start_;
    Example ex;
    while (static_cast<int64_t>(in.size()) < window_ && input_->next(ex)) in.push_back(std::move(ex));
    if (static_cast<int64_t>(in.size()) < window_) input_done_ = true;
    if (in.empty()) return false;
    next_window_start_ = input_->position();
    rows_ = convert_(in);
    pos_.input = start;
    pos_.rows = 0;
  }
  return true;
}

bool BatchedDataset::next(std::vector<Example>& batch) {
  batch.clear();
  // Rows may span windows; the position records the window of the last row.
  while (static_cast<int>(batch.size()) < batch_size_) {
    if (next_row_ >= rows_.size() && !fill_window()) break;
    batch.push_back(rows_[next_row_++]);
    pos_.rows = static_cast<int64_t>(next_row_);
  }
  if (batch.empty() || (drop_remainder_ && static_cast<int>(batch.size()) < batch_size_)) {
    batch.clear();
    return false;
  }
  ++pos_.batches;
  return true;
}

std::unique_ptr<BatchedDataset> get_batched_dataset(const std::string& name, DatasetOptions options, ConvertFn convert,
                                                    int64_t window, int batch_size, bool drop_remainder,
                                                    std::optional<BatchPosition> resume) {
  options.start = 0;
  auto factory = [name, options](const std::optional<Position>& at) {
    DatasetOptions o = options;
    o.resume = at;
    return get_dataset(name, o);
  };
  return std::make_unique<BatchedDataset>(factory, std::move(convert), window, batch_size, drop_remainder, resume);
}

}  // namespace seqio
