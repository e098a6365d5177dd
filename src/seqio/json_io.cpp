#include "seqio/json_io.h"

#include <stdexcept>

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
        t.push_back(e.get<int32_t>());
      }
      ex[it.key()] = std::move(t);
    } else {
      throw std::runtime_error("field '" + it.key() + "' has an unsupported JSON type");
    }
  }
  return ex;
}

}  // namespace seqio
