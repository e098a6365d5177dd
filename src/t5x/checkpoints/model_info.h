// model-info.txt as t5x writes it into MODEL_DIR (t5x.md §3.2): one line per
// variable with its name, size, shape (with logical axis names when known) and
// partition spec, then the total parameter count; optimizer states follow in a
// second section.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace t5x {

struct ModelInfoEntry {
  std::string name;                        // "encoder/layers_0/attention/query/kernel"
  std::vector<int64_t> shape;
  std::vector<std::string> logical_axes;   // e.g. {"embed", "joined_kv"}; may be empty
  std::string partition_spec;              // e.g. "(None, 'model')" or "None"
  std::string dtype = "float32";
};

// Renders the text: "Variable <name> size <n> shape (embed=768, mlp=2048) partition spec (None, 'model')"
// lines for `params`, "Total number of parameters: N", then the same lines for
// `optimizer_states` (if any) and their total.
std::string format_model_info(const std::vector<ModelInfoEntry>& params,
                              const std::vector<ModelInfoEntry>& optimizer_states = {});
// Writes format_model_info(...) to `path` (atomic replace). Throws CheckpointError.
void write_model_info(const std::string& path, const std::vector<ModelInfoEntry>& params,
                      const std::vector<ModelInfoEntry>& optimizer_states = {});

}  // namespace t5x
