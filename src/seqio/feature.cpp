#include "seqio/feature.h"

#include <stdexcept>

namespace seqio {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat64: return "float64";
    case DType::kString: return "string";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  if (name == "int32") return DType::kInt32;
  if (name == "int64") return DType::kInt64;
  if (name == "float64" || name == "float32") return DType::kFloat64;
  if (name == "string") return DType::kString;
  throw std::invalid_argument("[dtype_from_name] unknown dtype '" + name + "'");
}

bool value_matches(const FeatureValue& v, DType d) {
  switch (d) {
    case DType::kInt32: return std::holds_alternative<Tokens>(v);
    case DType::kInt64: return std::holds_alternative<int64_t>(v);
    case DType::kFloat64: return std::holds_alternative<double>(v);
    case DType::kString: return std::holds_alternative<std::string>(v);
  }
  return false;
}

}  // namespace seqio
