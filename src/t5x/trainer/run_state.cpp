#include "t5x/trainer/run_state.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <span>

#include "seqio/errors.h"
#include "seqio/json_io.h"
#include "t5x/checkpoints/file_io.h"

namespace t5x::trainer {

std::string data_state_to_json(const DataState& s) {
  nlohmann::json j;
  j["seed"] = s.seed;
  j["rng_seed"] = s.rng_seed;
  j["position"] = nlohmann::json::parse(seqio::batch_position_to_json(s.position));
  return j.dump();
}

DataState data_state_from_json(const std::string& text, const std::string& origin) {
  const std::string hint = "\n  hint: delete the checkpoint's train_ds-*.json to restart the data stream";
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw seqio::DataError("[trainer] " + origin + ": malformed data-position file (not a JSON object)" + hint);
  DataState s;
  try {
    s.seed = seqio::json_uint_field(j, "seed", origin, "seed", UINT64_MAX);
    s.rng_seed = seqio::json_uint_field(j, "rng_seed", origin, "rng_seed", UINT64_MAX);
    auto pos = j.find("position");
    if (pos == j.end()) throw seqio::DataError(origin + ": field 'position' is missing");
    s.position = seqio::batch_position_from_json(pos->dump(), origin + " (field 'position')");
  } catch (const seqio::DataError& e) {
    throw seqio::DataError(std::string("[trainer] ") + e.what() + hint);
  }
  return s;
}

namespace {
std::string eval_completed_path(const std::string& model_dir) { return model_dir + "/eval_completed.json"; }
}  // namespace

std::optional<int64_t> last_evaluated_step(const std::string& model_dir) {
  std::ifstream f(eval_completed_path(model_dir));
  if (!f) return std::nullopt;
  // Unreadable counts as absent: the evaluation is then simply run again.
  auto j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return std::nullopt;
  return j["step"].get<int64_t>();
}

void record_evaluated_step(const std::string& model_dir, int64_t step) {
  const std::string text = nlohmann::json{{"step", step}}.dump() + "\n";
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  fileio::write_file_atomic(eval_completed_path(model_dir), std::span(bytes, text.size()), false);
}

}  // namespace t5x::trainer
