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

// The state files the product writes and reads back (positions, cache info):
// obj[key] as an integer in [0, max]. A missing key, a non-object, a string,
// a fraction or a value out of range throws DataError
// "<where>: field '<field>' ..." (nlohmann's get<int64_t>() would silently
// truncate 2.5, and 1e300 is undefined behaviour).
uint64_t json_uint_field(const nlohmann::json& obj, const std::string& key, const std::string& where,
                         const std::string& field, uint64_t max);
// The same with max = 2^62, as int64_t: a count of a real run stays far
// below it, and resuming can add to it without overflowing int64.
int64_t json_count_field(const nlohmann::json& obj, const std::string& key, const std::string& where,
                         const std::string& field);

}  // namespace seqio
