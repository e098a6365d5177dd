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

}  // namespace
}  // namespace seqio
