// The trainer's records read back on a restart (run_state.h): the data
// position of a checkpoint (train_ds-*.json) and eval_completed.json.
#include "t5x/trainer/run_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "seqio/errors.h"

namespace t5x::trainer {
namespace {

// The file of tests/data/tf_mtf_tiny/t5x/checkpoint_2, as the trainer wrote it.
constexpr const char* kSaved =
    R"({"position":{"batches":2,"input":{"block":0,"emitted":0,"epoch":0,"offset":0},"rows":8},"rng_seed":5,"seed":5})";

TEST(RunState, DataStateRoundTrips) {
  const DataState s = data_state_from_json(kSaved);
  EXPECT_EQ(s.seed, 5u);
  EXPECT_EQ(s.rng_seed, 5u);
  EXPECT_EQ(s.position.rows, 8);
  EXPECT_EQ(s.position.batches, 2);
  EXPECT_EQ(data_state_to_json(s), kSaved);
  DataState big = s;
  big.seed = UINT64_MAX;  // a drawn seed uses all 64 bits
  EXPECT_EQ(data_state_from_json(data_state_to_json(big)), big);
}

// Damaged files (fuzz/run_state_fuzzer) name the file and the field; a seed
// of -1 used to wrap to 2^64-1 and 1e300 was undefined behaviour.
TEST(RunState, DamagedDataStateNamesTheFileAndField) {
  auto expect_error = [](const std::string& json, const std::string& what) {
    try {
      data_state_from_json(json, "ckpt/train_ds-000-of-001.json");
      ADD_FAILURE() << "no error for " << json;
    } catch (const seqio::DataError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("delete the checkpoint's train_ds-*.json"), std::string::npos) << e.what();
    }
  };
  const std::string pos = R"("position":{"batches":2,"input":{"block":0,"emitted":0,"epoch":0,"offset":0},"rows":8})";
  expect_error(R"({"seed":-1,"rng_seed":5,)" + pos + "}", "ckpt/train_ds-000-of-001.json: field 'seed' is -1");
  expect_error(R"({"seed":5,"rng_seed":1e300,)" + pos + "}",
               "ckpt/train_ds-000-of-001.json: field 'rng_seed' is 1e+300; expected an integer in [0, "
               "18446744073709551615]");
  expect_error(R"({"seed":5,"rng_seed":5})", "ckpt/train_ds-000-of-001.json: field 'position' is missing");
  expect_error(R"({"seed":5,"rng_seed":5,"position":{"batches":2,"input":{"block":0,"emitted":0,"epoch":0,)"
               R"("offset":0.5},"rows":8}})",
               "ckpt/train_ds-000-of-001.json (field 'position') (field 'input'): field 'offset' is 0.5");
  expect_error("[]", "ckpt/train_ds-000-of-001.json: malformed data-position file");
}

TEST(RunState, EvalCompletedRoundTripsAndDamageCountsAsAbsent) {
  const auto dir = std::filesystem::temp_directory_path() / ("run_state_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(last_evaluated_step(dir.string()), std::nullopt);
  record_evaluated_step(dir.string(), 30);
  EXPECT_EQ(last_evaluated_step(dir.string()), std::optional<int64_t>(30));
  std::ofstream(dir / "eval_completed.json") << R"({"step": 30.5})";
  EXPECT_EQ(last_evaluated_step(dir.string()), std::nullopt);
  std::ofstream(dir / "eval_completed.json") << R"({"st)";
  EXPECT_EQ(last_evaluated_step(dir.string()), std::nullopt);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace t5x::trainer
