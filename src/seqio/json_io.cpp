#include "seqio/json_io.h"

#include <cstdint>
#include <stdexcept>

#include "seqio/errors.h"

namespace seqio {

nlohmann::json example_to_json(const Example& ex) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : ex) {
    std::visit([&, &key = k](const auto& x) { j[key] = x; }, v);
  }
  return j;
}

std::string example_to_json_line(const Example& ex) {
  return example_to_json(ex).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Example example_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("expected a JSON object");
  Example ex;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& v = it.value();
    if (v.is_string()) {
      ex[it.key()] = v.get<std::string>();
    } else if (v.is_number_integer()) {
      ex[it.key()] = v.get<int64_t>();
    } else if (v.is_number()) {
      ex[it.key()] = v.get<double>();
    } else if (v.is_array()) {
      Tokens t;
      for (const auto& e : v) {
        if (!e.is_number_integer()) throw std::runtime_error("field '" + it.key() + "' must hold integer ids");
        // (get<int32_t> wraps: 99999999999 became 1215752191)
        const bool fits = e.is_number_unsigned() ? e.get<uint64_t>() <= uint64_t(INT32_MAX)
                                                 : e.get<int64_t>() >= INT32_MIN && e.get<int64_t>() <= INT32_MAX;
        if (!fits)
          throw std::runtime_error("field '" + it.key() + "' holds id " + e.dump() + ", outside the int32 range of ids");
        t.push_back(e.get<int32_t>());
      }
      ex[it.key()] = std::move(t);
    } else {
      throw std::runtime_error("field '" + it.key() + "' has an unsupported JSON type");
    }
  }
  return ex;
}

uint64_t json_uint_field(const nlohmann::json& obj, const std::string& key, const std::string& where,
                         const std::string& field, uint64_t max) {
  if (!obj.is_object()) throw DataError(where + ": expected a JSON object holding '" + field + "', got " + obj.type_name());
  auto it = obj.find(key);
  if (it == obj.end()) throw DataError(where + ": field '" + field + "' is missing");
  const bool in_range = it->is_number_unsigned() ? it->get<uint64_t>() <= max
                                                 : it->is_number_integer() && it->get<int64_t>() >= 0 &&
                                                       static_cast<uint64_t>(it->get<int64_t>()) <= max;
  if (!in_range)
    throw DataError(where + ": field '" + field + "' is " + it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "; expected an integer in [0, " +
                    std::to_string(max) + "]");
  return it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
}

int64_t json_count_field(const nlohmann::json& obj, const std::string& key, const std::string& where,
                         const std::string& field) {
  return static_cast<int64_t>(json_uint_field(obj, key, where, field, uint64_t{1} << 62));
}

}  // namespace seqio
