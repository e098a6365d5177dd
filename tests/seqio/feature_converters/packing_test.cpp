// seqio.md §5.3-5.5 and §8 T1-T5: trim_and_pack, trim_and_pad,
// make_autoregressive_inputs.
#include "seqio/feature_converters/packing.h"

#include <gtest/gtest.h>

namespace seqio::utils {
namespace {

Example ex(Tokens inputs, Tokens targets) {
  return Example{{"inputs", std::move(inputs)}, {"targets", std::move(targets)}};
}

TEST(TrimAndPack, T1Basic) {
  std::vector<Example> ds{ex({7, 8, 5, 1}, {3, 9, 1}), ex({8, 4, 9, 3, 1}, {4, 1})};
  ds[0]["idx"] = Tokens{0};
  ds[1]["idx"] = Tokens{1};
  auto out = trim_and_pack_dataset(ds, {{"inputs", 10}, {"targets", 7}});
  ASSERT_EQ(out.size(), 1u);
  const Example expect{
      {"inputs", Tokens{7, 8, 5, 1, 8, 4, 9, 3, 1, 0}},
      {"inputs_segment_ids", Tokens{1, 1, 1, 1, 2, 2, 2, 2, 2, 0}},
      {"inputs_positions", Tokens{0, 1, 2, 3, 0, 1, 2, 3, 4, 0}},
      {"targets", Tokens{3, 9, 1, 4, 1, 0, 0}},
      {"targets_segment_ids", Tokens{1, 1, 1, 2, 2, 0, 0}},
      {"targets_positions", Tokens{0, 1, 2, 0, 1, 0, 0}}};
  EXPECT_EQ(out[0], expect);  // "idx" is dropped
}

TEST(TrimAndPack, T2WithoutEos) {
  auto out = trim_and_pack_dataset({ex({7, 8, 5}, {3, 9}), ex({8, 4, 9, 3}, {4})},
                                   {{"inputs", 8}, {"targets", 5}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(get_tokens(out[0], "inputs"), (Tokens{7, 8, 5, 8, 4, 9, 3, 0}));
  EXPECT_EQ(get_tokens(out[0], "inputs_segment_ids"), (Tokens{1, 1, 1, 2, 2, 2, 2, 0}));
  EXPECT_EQ(get_tokens(out[0], "inputs_positions"), (Tokens{0, 1, 2, 0, 1, 2, 3, 0}));
  EXPECT_EQ(get_tokens(out[0], "targets"), (Tokens{3, 9, 4, 0, 0}));
  EXPECT_EQ(get_tokens(out[0], "targets_segment_ids"), (Tokens{1, 1, 2, 0, 0}));
  EXPECT_EQ(get_tokens(out[0], "targets_positions"), (Tokens{0, 1, 0, 0, 0}));
}

TEST(TrimAndPack, T3OverLongSequencesAreTrimmed) {
  auto out = trim_and_pack_dataset(
      {ex({7, 8, 5, 6, 9, 4, 1}, {3, 9, 1}), ex({8, 4, 9, 3, 5, 7, 9, 1}, {4, 1})},
      {{"inputs", 7}, {"targets", 3}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(get_tokens(out[0], "inputs"), (Tokens{7, 8, 5, 6, 9, 4, 1}));
  EXPECT_EQ(get_tokens(out[0], "inputs_segment_ids"), Tokens(7, 1));
  EXPECT_EQ(get_tokens(out[0], "inputs_positions"), (Tokens{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(get_tokens(out[0], "targets"), (Tokens{3, 9, 1}));
  EXPECT_EQ(get_tokens(out[0], "targets_positions"), (Tokens{0, 1, 2}));
  EXPECT_EQ(get_tokens(out[1], "inputs"), (Tokens{8, 4, 9, 3, 5, 7, 9}));  // EOS cut
  EXPECT_EQ(get_tokens(out[1], "inputs_segment_ids"), Tokens(7, 1));
  EXPECT_EQ(get_tokens(out[1], "targets"), (Tokens{4, 1, 0}));
  EXPECT_EQ(get_tokens(out[1], "targets_segment_ids"), (Tokens{1, 1, 0}));
  EXPECT_EQ(get_tokens(out[1], "targets_positions"), (Tokens{0, 1, 0}));
}

TEST(TrimAndPack, NextFitWithinWindows) {
  // Window = max length = 4 examples. Next-fit: [a b] then c overflows -> new
  // row [c d]; e starts a new window even though it would fit.
  std::vector<Example> ds;
  for (Tokens t : {Tokens{5}, Tokens{6}, Tokens{7, 7, 7}, Tokens{8}, Tokens{9}})
    ds.push_back(Example{{"targets", t}});
  auto out = trim_and_pack_dataset(ds, {{"targets", 4}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(get_tokens(out[0], "targets"), (Tokens{5, 6, 0, 0}));
  EXPECT_EQ(get_tokens(out[1], "targets"), (Tokens{7, 7, 7, 8}));
  EXPECT_EQ(get_tokens(out[1], "targets_segment_ids"), (Tokens{1, 1, 1, 2}));
  EXPECT_EQ(get_tokens(out[2], "targets"), (Tokens{9, 0, 0, 0}));
  EXPECT_EQ(packing_window({{"targets", 4}, {"inputs", 9}}), 9);
}

TEST(TrimAndPack, InnerZeroKeepsCountNonzeroPrefix) {
  // count_nonzero([5, 0, 6]) = 2 -> [5, 0] is taken; the 0 gets segment 0.
  auto out = trim_and_pack_dataset({Example{{"targets", Tokens{5, 0, 6}}},
                                    Example{{"targets", Tokens{7}}}},
                                   {{"targets", 5}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(get_tokens(out[0], "targets"), (Tokens{5, 0, 7, 0, 0}));
  EXPECT_EQ(get_tokens(out[0], "targets_positions"), (Tokens{0, 1, 0, 0, 0}));
  EXPECT_EQ(get_tokens(out[0], "targets_segment_ids"), (Tokens{1, 0, 2, 0, 0}));
}

TEST(TrimAndPack, Errors) {
  EXPECT_THROW(trim_and_pack_dataset({Example{{"targets", Tokens{1}}}}, {{"inputs", 3}}),
               std::invalid_argument);
  EXPECT_THROW(trim_and_pack_dataset({Example{{"targets", std::string("x")}}}, {{"targets", 3}}),
               std::invalid_argument);
}

TEST(TrimAndPad, T4RankOne) {
  std::vector<Example> ds{Example{{"inputs", Tokens{7, 8, 5, 6, 1}}, {"idx", int64_t{0}}},
                          Example{{"inputs", Tokens{8, 4, 9, 3, 5, 7, 9, 5}}, {"idx", int64_t{1}}}};
  auto out = trim_and_pad_dataset(ds, {{"inputs", 7}, {"targets", 3}});
  EXPECT_EQ(get_tokens(out[0], "inputs"), (Tokens{7, 8, 5, 6, 1, 0, 0}));
  EXPECT_EQ(get_tokens(out[1], "inputs"), (Tokens{8, 4, 9, 3, 5, 7, 9}));
  EXPECT_EQ(std::get<int64_t>(out[1].at("idx")), 1);
  EXPECT_FALSE(out[0].count("targets"));
}

TEST(AutoregressiveInputs, T5Cases) {
  EXPECT_EQ(make_autoregressive_inputs({3, 8, 9, 5, 1, 0, 0}), (Tokens{0, 3, 8, 9, 5, 1, 0}));
  const Tokens seg{1, 1, 1, 2, 2, 3, 3, 3, 0, 0};
  EXPECT_EQ(make_autoregressive_inputs({3, 8, 1, 9, 1, 5, 4, 1, 0, 0}, &seg),
            (Tokens{0, 3, 8, 0, 9, 0, 5, 4, 0, 0}));
  EXPECT_EQ(make_autoregressive_inputs({3, 8, 1, 9, 6, 5, 4, 1, 0, 0}, &seg),
            (Tokens{0, 3, 8, 0, 9, 0, 5, 4, 0, 0}));
  EXPECT_EQ(make_autoregressive_inputs({3, 8, 1, 9, 1, 5, 4, 1, 0, 0}, &seg, 10),
            (Tokens{10, 3, 8, 10, 9, 10, 5, 4, 10, 0}));
  EXPECT_EQ(make_autoregressive_inputs({3, 8, 2, 9, 3, 5, 4, 1, 0, 0}),
            (Tokens{0, 3, 8, 2, 9, 3, 5, 4, 1, 0}));
  EXPECT_EQ(make_autoregressive_inputs({3, 8, 2, 9, 3, 5, 4, 1, 0, 0}, nullptr, 10),
            (Tokens{10, 3, 8, 2, 9, 3, 5, 4, 1, 0}));
  EXPECT_EQ(make_autoregressive_inputs({}), Tokens{});
  const Tokens short_seg{1, 1};
  EXPECT_THROW(make_autoregressive_inputs({3, 8, 1}, &short_seg), std::invalid_argument);
}

}  // namespace
}  // namespace seqio::utils
