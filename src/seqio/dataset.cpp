#include "seqio/dataset.h"

#include <nlohmann/json.hpp>

#include "seqio/errors.h"

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
StreamPosition stream_from(const nlohmann::json& j) {
  StreamPosition p;
  p.emitted = j.at("emitted").get<int64_t>();
  p.epoch = j.at("epoch").get<int64_t>();
  p.block = j.at("block").get<int64_t>();
  p.offset = j.at("offset").get<int64_t>();
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

Position position_from_json(const std::string& s) {
  try {
    auto j = nlohmann::json::parse(s);
    Position p;
    p.stream = stream_from(j);
    if (j.contains("tasks"))
      for (auto it = j["tasks"].begin(); it != j["tasks"].end(); ++it) p.tasks[it.key()] = stream_from(it.value());
    if (j.contains("exhausted")) p.exhausted = j["exhausted"].get<std::vector<std::string>>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("malformed pipeline position JSON: ") + e.what() +
                    " (hint: expected {\"emitted\":..,\"epoch\":..,\"block\":..,\"offset\":..})");
  }
}

std::vector<Example> take_all(Dataset& ds, int64_t limit) {
  std::vector<Example> out;
  Example ex;
  while ((limit < 0 || static_cast<int64_t>(out.size()) < limit) && ds.next(ex)) out.push_back(std::move(ex));
  return out;
}

}  // namespace seqio
