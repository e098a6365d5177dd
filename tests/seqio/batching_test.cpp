// BatchedDataset: windows, batches, drop_remainder, exact resume.
#include "seqio/batching.h"

#include <gtest/gtest.h>

#include "seqio/errors.h"
#include "seqio/mixture.h"
#include "test_util.h"

namespace seqio {
namespace {

using testing::to_lines;

class BatchingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TaskRegistry::reset();
    MixtureRegistry::reset();
    std::vector<Example> exs;
    for (int i = 0; i < 37; ++i) exs.push_back(Example{{"targets", Tokens{i + 2, 1}}});
    TaskRegistry::add(std::make_shared<Task>(
        "batch_task",
        std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"train", exs}}),
        OutputFeatures{{"targets", Feature{std::make_shared<PassThroughVocabulary>(100, 1)}}}));
    opts_.seed = 5;
    opts_.block_size = 8;
    opts_.num_epochs = 2;
  }
  void TearDown() override { TaskRegistry::reset(); }

  // "Packs" consecutive pairs of a window into one row (a stand-in for a
  // packing feature converter).
  static std::vector<Example> pair_rows(const std::vector<Example>& w) {
    std::vector<Example> rows;
    for (size_t i = 0; i < w.size(); i += 2) {
      Tokens t = get_tokens(w[i], "targets");
      if (i + 1 < w.size()) {
        const auto& u = get_tokens(w[i + 1], "targets");
        t.insert(t.end(), u.begin(), u.end());
      }
      rows.push_back(Example{{"targets", t}});
    }
    return rows;
  }
  std::vector<std::vector<std::string>> all_batches(BatchedDataset& ds) {
    std::vector<std::vector<std::string>> out;
    std::vector<Example> b;
    while (ds.next(b)) out.push_back(to_lines(b));
    return out;
  }
  DatasetOptions opts_;
};

TEST_F(BatchingTest, BatchesAndDropRemainder) {
  auto ds = get_batched_dataset("batch_task", opts_, pair_rows, /*window=*/6, /*batch=*/4);
  auto batches = all_batches(*ds);
  // 74 examples -> windows of 6 (12 full + 2 left) -> 12*3 + 1 = 37 rows -> 9 full batches.
  EXPECT_EQ(batches.size(), 9u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 4u);
  auto keep = get_batched_dataset("batch_task", opts_, pair_rows, 6, 4, /*drop_remainder=*/false);
  auto all = all_batches(*keep);
  ASSERT_EQ(all.size(), 10u);
  EXPECT_EQ(all.back().size(), 1u);
  EXPECT_EQ(ds->position().batches, 9);
}

TEST_F(BatchingTest, ResumeAtEveryBatchEqualsTail) {
  auto full = all_batches(*get_batched_dataset("batch_task", opts_, pair_rows, 6, 4));
  for (size_t k = 0; k <= full.size(); ++k) {
    auto ds = get_batched_dataset("batch_task", opts_, pair_rows, 6, 4);
    std::vector<Example> b;
    for (size_t i = 0; i < k; ++i) ASSERT_TRUE(ds->next(b));
    auto saved = batch_position_from_json(batch_position_to_json(ds->position()));
    EXPECT_EQ(saved, ds->position());
    auto resumed = get_batched_dataset("batch_task", opts_, pair_rows, 6, 4, true, saved);
    auto tail = all_batches(*resumed);
    EXPECT_EQ(tail, std::vector<std::vector<std::string>>(full.begin() + k, full.end())) << "k " << k;
  }
}

TEST_F(BatchingTest, Misuse) {
  EXPECT_THROW(get_batched_dataset("batch_task", opts_, pair_rows, 0, 4), std::invalid_argument);
  EXPECT_THROW(batch_position_from_json("{}"), DataError);
}

// Damaged position files (fuzz/run_state_fuzzer): a DataError naming the
// origin and the field. nlohmann's get<int64_t>() truncated 2.5, wrapped
// negative counts into huge skips, and 1e300 was undefined behaviour.
TEST_F(BatchingTest, DamagedPositionsNameTheField) {
  auto expect_error = [](const std::string& json, const std::string& what, bool batched) {
    try {
      if (batched)
        batch_position_from_json(json, "pos.json");
      else
        position_from_json(json, "pos.json");
      ADD_FAILURE() << "no error for " << json;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const std::string ok = R"({"emitted":3,"epoch":0,"block":1,"offset":2})";
  EXPECT_EQ(position_from_json(ok).stream, (StreamPosition{3, 0, 1, 2}));
  expect_error(R"({"emitted":3,"epoch":0,"block":1,"offset":2.5})",
               "pos.json: field 'offset' is 2.5; expected an integer in [0, 4611686018427387904]", false);
  expect_error(R"({"emitted":3,"epoch":-1,"block":1,"offset":2})", "pos.json: field 'epoch' is -1", false);
  expect_error(R"({"emitted":1e300,"epoch":0,"block":1,"offset":2})", "pos.json: field 'emitted' is 1e+300", false);
  expect_error(R"({"emitted":3,"epoch":0,"offset":2})", "pos.json: field 'block' is missing", false);
  expect_error(R"({"emitted":3,"epoch":0,"block":1,"offset":2,"tasks":{"a":{"emitted":"1"}}})",
               "pos.json: field 'tasks.a.emitted' is \"1\"", false);
  expect_error(R"({"emitted":3,"epoch":0,"block":1,"offset":2,"tasks":[1]})",
               "pos.json: field 'tasks' is not an object", false);
  expect_error(R"({"emitted":3,"epoch":0,"block":1,"offset":2,"exhausted":[1]})",
               "pos.json: field 'exhausted' holds a non-string number", false);
  expect_error("[1]", "pos.json: the pipeline position is not a JSON object", false);
  expect_error("{\"emitted\":", "pos.json: malformed pipeline position JSON", false);
  expect_error(R"({"input":)" + ok + R"(,"rows":-2,"batches":1})", "pos.json: field 'rows' is -2", true);
  expect_error(R"({"input":{"emitted":3},"rows":0,"batches":1})", "pos.json (field 'input'): field 'epoch' is missing",
               true);
  expect_error(R"({"rows":0,"batches":1})", "pos.json: field 'input' is missing", true);
}

// A block past the end of the epoch reads on from the next epoch; with
// block * block_size past int64 (2^62 * 8) the product overflowed, so it
// re-read the first epoch instead.
TEST_F(BatchingTest, ResumeFromAHugeBlockEqualsAnyBlockPastTheEnd) {
  auto read = [&](int64_t block) {
    DatasetOptions o = opts_;
    o.resume = Position{};
    o.resume->stream.block = block;
    return to_lines(take_all(*get_dataset("batch_task", o)));
  };
  const auto past = read(100);  // 100 * 8 > 37 examples
  EXPECT_EQ(past.size(), 37u);  // the second epoch
  EXPECT_EQ(read(int64_t{1} << 62), past);
}

}  // namespace
}  // namespace seqio
