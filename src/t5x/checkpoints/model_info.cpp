#include "t5x/checkpoints/model_info.h"

#include <algorithm>
#include <sstream>

#include "t5x/checkpoints/file_io.h"

namespace t5x {

namespace {

std::string shape_text(const ModelInfoEntry& e) {
  std::string s = "(";
  for (size_t i = 0; i < e.shape.size(); ++i) {
    if (i) s += ", ";
    if (i < e.logical_axes.size() && !e.logical_axes[i].empty()) s += e.logical_axes[i] + "=";
    s += std::to_string(e.shape[i]);
  }
  if (e.shape.size() == 1) s += ",";
  return s + ")";
}

int64_t numel(const ModelInfoEntry& e) {
  int64_t n = 1;
  for (auto d : e.shape) n *= d;
  return n;
}

void section(std::ostringstream& os, const std::vector<ModelInfoEntry>& entries, const char* total_label) {
  size_t wname = 0, wsize = 0, wshape = 0;
  for (const auto& e : entries) {
    wname = std::max(wname, e.name.size());
    wsize = std::max(wsize, std::to_string(numel(e)).size());
    wshape = std::max(wshape, shape_text(e).size());
  }
  int64_t total = 0;
  for (const auto& e : entries) {
    std::string size = std::to_string(numel(e)), shape = shape_text(e);
    os << "Variable " << e.name << std::string(wname - e.name.size() + 1, ' ')
       << "size " << size << std::string(wsize - size.size() + 1, ' ')
       << "shape " << shape << std::string(wshape - shape.size() + 1, ' ')
       << "partition spec " << (e.partition_spec.empty() ? "None" : e.partition_spec) << "\n";
    total += numel(e);
  }
  os << total_label << total << "\n";
}

}  // namespace

std::string format_model_info(const std::vector<ModelInfoEntry>& params,
                              const std::vector<ModelInfoEntry>& optimizer_states) {
  std::ostringstream os;
  section(os, params, "Total number of parameters: ");
  if (!optimizer_states.empty()) {
    os << "\n";
    section(os, optimizer_states, "Total number of optimizer state values: ");
  }
  return os.str();
}

void write_model_info(const std::string& path, const std::vector<ModelInfoEntry>& params,
                      const std::vector<ModelInfoEntry>& optimizer_states) {
  std::string text = format_model_info(params, optimizer_states);
  fileio::write_file_atomic(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}, true);
}

}  // namespace t5x
