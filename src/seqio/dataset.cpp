#include "seqio/dataset.h"

#include <nlohmann/json.hpp>

#include "seqio/errors.h"
#include "seqio/json_io.h"

namespace seqio {

ShardInfo parse_shard_info(const std::string& s) {
  auto slash = s.find('/');
  try {
    if (slash != std::string::npos) {
      size_t a = 0, b = 0;
      ShardInfo info{std::stoi(s.substr(0, slash), &a), std::stoi(s.substr(slash + 1), &b)};
      if (a == slash && b == s.size() - slash - 1 && info.num_shards >= 1 && info.index >= 0 &&
          info.index < info.num_shards)
        return info;
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("[parse_shard_info] '" + s + "' is not INDEX/COUNT with 0 <= INDEX < COUNT");
}

namespace {
nlohmann::json stream_json(const StreamPosition& p) {
  return {{"emitted", p.emitted}, {"epoch", p.epoch}, {"block", p.block}, {"offset", p.offset}};
}
StreamPosition stream_from(const nlohmann::json& j, const std::string& where, const std::string& prefix) {
  StreamPosition p;
  p.emitted = json_count_field(j, "emitted", where, prefix + "emitted");
  p.epoch = json_count_field(j, "epoch", where, prefix + "epoch");
  p.block = json_count_field(j, "block", where, prefix + "block");
  p.offset = json_count_field(j, "offset", where, prefix + "offset");
  return p;
}
}  // namespace

std::string position_to_json(const Position& p) {
  nlohmann::json j = stream_json(p.stream);
  if (!p.tasks.empty()) {
    nlohmann::json t = nlohmann::json::object();
    for (const auto& [k, v] : p.tasks) t[k] = stream_json(v);
    j["tasks"] = t;
  }
  if (!p.exhausted.empty()) j["exhausted"] = p.exhausted;
  return j.dump();
}

Position position_from_json(const std::string& s, const std::string& origin) {
  const std::string hint = " (hint: expected {\"emitted\":..,\"epoch\":..,\"block\":..,\"offset\":..})";
  const auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded()) throw DataError(origin + ": malformed pipeline position JSON" + hint);
  if (!j.is_object()) throw DataError(origin + ": the pipeline position is not a JSON object" + hint);
  Position p;
  p.stream = stream_from(j, origin, "");
  if (auto t = j.find("tasks"); t != j.end()) {
    if (!t->is_object()) throw DataError(origin + ": field 'tasks' is not an object of task positions");
    for (auto it = t->begin(); it != t->end(); ++it)
      p.tasks[it.key()] = stream_from(it.value(), origin, "tasks." + it.key() + ".");
  }
  if (auto e = j.find("exhausted"); e != j.end()) {
    if (!e->is_array()) throw DataError(origin + ": field 'exhausted' is not a list of task names");
    for (const auto& name : *e) {
      if (!name.is_string()) throw DataError(origin + ": field 'exhausted' holds a non-string " + name.type_name());
      p.exhausted.push_back(name.get<std::string>());
    }
  }
  return p;
}

std::vector<Example> take_all(Dataset& ds, int64_t limit) {
  std::vector<Example> out;
  Example ex;
  while ((limit < 0 || static_cast<int64_t>(out.size()) < limit) && ds.next(ex)) out.push_back(std::move(ex));
  return out;
}

}  // namespace seqio
