// Integers read from the JSON of checkpoint files (.zarray, safetensors
// headers, config.json, TensorStore specs). nlohmann's get<int64_t>() also
// converts floats, and a float such as 1e300 overflows that cast (undefined
// behaviour, found by fuzz/zarr_fuzzer). These accept JSON integers within
// int64 only and throw nlohmann::json::type_error otherwise, which the
// readers already turn into a CheckpointError naming the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace t5x {

inline int64_t json_int(const nlohmann::json& j) {
  if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX)))
    throw nlohmann::json::type_error::create(302, "expected an integer of at most 2^63 - 1, got " + j.dump(), &j);
  return j.get<int64_t>();
}

// j[key] as json_int, or `dflt` when the key is absent or null (config.json
// fields that keep transformers' defaults).
inline int64_t json_int_or(const nlohmann::json& j, const char* key, int64_t dflt) {
  return j.contains(key) && !j[key].is_null() ? json_int(j[key]) : dflt;
}

inline std::vector<int64_t> json_ints(const nlohmann::json& j) {
  if (!j.is_array())
    throw nlohmann::json::type_error::create(302, "expected a list of integers, got " + j.dump(), &j);
  std::vector<int64_t> v;
  for (const auto& e : j) v.push_back(json_int(e));
  return v;
}

}  // namespace t5x
