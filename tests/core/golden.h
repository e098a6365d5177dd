// Loads tests/golden/core/random.json (written by scripts/golden/core_random.py).
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/random.h"

namespace t5x::testing {

inline nlohmann::json load_random_golden() {
  std::ifstream f(std::string(T5X_SOURCE_DIR) + "/tests/golden/core/random.json");
  if (!f) throw std::runtime_error("missing tests/golden/core/random.json");
  return nlohmann::json::parse(f);
}

inline PRNGKey key_of(const nlohmann::json& j) {
  PRNGKey k;
  k.words = {j[0].get<uint32_t>(), j[1].get<uint32_t>()};
  return k;
}

}  // namespace t5x::testing
