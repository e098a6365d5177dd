// The JSON state files the product writes and reads back on a restart; the
// first byte picks the reader, the rest is the file:
//   0: a pipeline position (`seqio show --position-out/--resume`):
//      position_from_json, then resuming a task and a mixture from it;
//   1: a batched position: batch_position_from_json, then resuming batches;
//   2: a checkpoint's train_ds-*.json: t5x::trainer::data_state_from_json;
//   3: MODEL_DIR/eval_completed.json: last_evaluated_step.
// What parses must survive its to_json unchanged.
#include <cstdlib>
#include <optional>

#include "fuzz_util.h"
#include "seqio/batching.h"
#include "seqio/errors.h"
#include "seqio/mixture.h"
#include "seqio/task.h"
#include "t5x/trainer/run_state.h"

namespace {

// Two small tasks of 11 and 5 examples and a mixture of both, registered once.
void register_tasks() {
  static const bool done = [] {
    auto task = [](const std::string& name, int n) {
      std::vector<seqio::Example> exs;
      for (int i = 0; i < n; ++i) exs.push_back(seqio::Example{{"targets", seqio::Tokens{i + 2, 1}}});
      seqio::TaskRegistry::add(std::make_shared<seqio::Task>(
          name,
          std::make_shared<seqio::InMemoryDataSource>(std::map<std::string, std::vector<seqio::Example>>{{"train", exs}}),
          seqio::OutputFeatures{{"targets", seqio::Feature{std::make_shared<seqio::PassThroughVocabulary>(100, 1)}}}));
    };
    task("fuzz_a", 11);
    task("fuzz_b", 5);
    seqio::MixtureRegistry::add(std::make_shared<seqio::Mixture>(
        "fuzz_mix", std::vector<seqio::MixtureEntry>{{"fuzz_a", 2.0}, {"fuzz_b", 1.0}}));
    return true;
  }();
  (void)done;
}

seqio::DatasetOptions small_options() {
  seqio::DatasetOptions o;
  o.seed = 3;
  o.block_size = 4;
  o.num_epochs = 2;
  return o;
}

void resume_position(const seqio::Position& p) {
  register_tasks();
  for (const char* name : {"fuzz_a", "fuzz_mix"}) {
    auto o = small_options();
    o.resume = p;
    try {
      auto ds = seqio::get_dataset(name, o);
      seqio::Example ex;
      for (int i = 0; i < 64 && ds->next(ex); ++i) {
      }
    } catch (const seqio::DataError&) {
    }
  }
}

void resume_batches(const seqio::BatchPosition& p) {
  register_tasks();
  for (const char* name : {"fuzz_a", "fuzz_mix"}) {
    try {
      auto ds = seqio::get_batched_dataset(
          name, small_options(), [](const std::vector<seqio::Example>& w) { return w; }, 3, 2, true, p);
      std::vector<seqio::Example> batch;
      for (int i = 0; i < 32 && ds->next(batch); ++i) {
      }
    } catch (const seqio::DataError&) {
    }
  }
}

// The documented DataError gives nullopt; what parses must survive to_json.
template <class T>
std::optional<T> parse_checked(T (*from_json)(const std::string&, const std::string&),
                               std::string (*to_json)(const T&), const std::string& text, const std::string& origin) {
  std::optional<T> v;
  try {
    v = from_json(text, origin);
  } catch (const seqio::DataError&) {
    return std::nullopt;
  }
  if (from_json(to_json(*v), "<to_json>") != *v) std::abort();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(t5x_fuzz::as_text(data + 1, size - 1));
  switch (data[0] % 4) {
    case 0:
      if (auto p = parse_checked(seqio::position_from_json, seqio::position_to_json, text, "position.json"))
        resume_position(*p);
      break;
    case 1:
      if (auto p = parse_checked(seqio::batch_position_from_json, seqio::batch_position_to_json, text,
                                 "batch_position.json"))
        resume_batches(*p);
      break;
    case 2:
      parse_checked(t5x::trainer::data_state_from_json, t5x::trainer::data_state_to_json, text,
                    "train_ds-000-of-001.json");
      break;
    case 3: {
      const std::string dir = t5x_fuzz::scratch_dir();
      t5x_fuzz::write_file(dir + "/eval_completed.json", text);
      const auto step = t5x::trainer::last_evaluated_step(dir);
      if (step) {
        t5x::trainer::record_evaluated_step(dir, *step);
        if (t5x::trainer::last_evaluated_step(dir) != step) std::abort();
      }
      break;
    }
  }
  return 0;
}
