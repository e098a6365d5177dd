#include "t5x/summaries/metrics_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "t5x/summaries/event_writer.h"

namespace t5x {

MetricsJsonlWriter::MetricsJsonlWriter(const std::string& path) : path_(path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  f_ = std::fopen(path.c_str(), "ab");
  if (!f_) throw SummaryError("cannot open metrics log '" + path + "': " + std::strerror(errno));
}

MetricsJsonlWriter::~MetricsJsonlWriter() {
  if (f_) std::fclose(f_);
}

void MetricsJsonlWriter::write(int64_t step, const std::map<std::string, double>& metrics) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : metrics) {
    // JSON has no NaN/Inf: write them as strings so the line stays parseable.
    if (std::isfinite(v)) j[k] = v;
    else j[k] = std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  }
  write_json(step, std::move(j));
}

void MetricsJsonlWriter::write_json(int64_t step, nlohmann::json record) {
  record["step"] = step;
  std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size())
    throw SummaryError("cannot write metrics log '" + path_ + "': " + std::strerror(errno));
  std::fflush(f_);
}

}  // namespace t5x
