// Example <-> JSON (one object per line), used by `seqio show`, `convert`
// and JSONL sources. Keys come out sorted (std::map), numbers in shortest
// round-trip form, so equal examples give byte-identical lines.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "seqio/example.h"

namespace seqio {

nlohmann::json example_to_json(const Example& ex);
std::string example_to_json_line(const Example& ex);  // no trailing newline
// string -> string, integer -> int64, number -> double, array of integers ->
// Tokens. Throws std::runtime_error naming the offending key.
Example example_from_json(const nlohmann::json& j);

}  // namespace seqio
