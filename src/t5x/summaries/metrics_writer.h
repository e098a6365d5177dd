// JSONL metric logs in the shape of seqio's JSON logger / t5x:
// one object per line, {"step": <int>, "<metric>": <value>, ...}
// (`<task>-metrics.jsonl`), appended and flushed per call so that a killed
// run loses at most the line being written.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace t5x {

class MetricsJsonlWriter {
 public:
  // Creates parent directories; appends to an existing file. Throws SummaryError.
  explicit MetricsJsonlWriter(const std::string& path);
  ~MetricsJsonlWriter();
  MetricsJsonlWriter(const MetricsJsonlWriter&) = delete;
  MetricsJsonlWriter& operator=(const MetricsJsonlWriter&) = delete;

  void write(int64_t step, const std::map<std::string, double>& metrics);
  // Any JSON object; "step" is set to `step`.
  void write_json(int64_t step, nlohmann::json record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace t5x
