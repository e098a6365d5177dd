// Model configs read from the repository's gin model files, for the tests.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "t5x/gin/config.h"
#include "t5x/gin/registry.h"
#include "t5x/models/gin_model.h"

namespace t5x::testing {

// A registry with t5x's configurables (built once).
inline const gin::Registry& t5x_registry() {
  static gin::Registry r = [] {
    gin::Registry reg;
    gin::register_t5x_configurables(reg);
    return reg;
  }();
  return r;
}

// configs/models/<rel> with `bindings` applied.
inline ModelConfig load_model_gin(const std::string& rel, const std::vector<std::string>& bindings) {
  std::string path = (std::filesystem::path(T5X_SOURCE_DIR) / "configs" / "models" / rel).string();
  return read_model_config(gin::parse_config_files_and_bindings({path}, bindings, {}, &t5x_registry()));
}

}  // namespace t5x::testing
