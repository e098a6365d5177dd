// The Task-step wrappers chained like T5's c4_v220_span_corruption task:
// rekey -> tokenize -> span_corruption -> append_eos_after_trim.
#include "seqio/preprocessors/task_steps.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace seqio::preprocessors {
namespace {

std::vector<Example> run(const Preprocessor& p, std::vector<Example> xs,
                         const PreprocessContext& ctx) {
  if (p.kind == Preprocessor::Kind::kBlock) return p.block(std::move(xs), ctx);
  std::vector<Example> out;
  for (auto& x : xs)
    if (auto y = p.map(std::move(x), ctx)) out.push_back(std::move(*y));
  return out;
}

TEST(TaskSteps, C4StyleSpanCorruptionChain) {
  auto v = std::make_shared<ByteVocabulary>(100);
  const OutputFeatures of{{"inputs", test::feature(v)}, {"targets", test::feature(v)}};
  const SequenceLengths lengths{{"inputs", 128}, {"targets", 29}};  // helper(128) = (141, 29)
  PreprocessContext ctx{of, lengths, /*seed=*/5, /*key=*/0, /*epoch=*/0};
  std::vector<Example> raw;
  for (int i = 0; i < 30; ++i)
    raw.push_back(Example{{"text", std::string("Document number ") + std::to_string(i) +
                                      " says something about free software and its licence."},
                         {"url", std::string("u")}});
  std::vector<Example> xs = raw;
  const std::vector<Preprocessor> steps{task::rekey({{"inputs", ""}, {"targets", "text"}}),
                                        task::tokenize(), task::span_corruption(),
                                        task::append_eos_after_trim()};
  for (const auto& s : steps) xs = run(s, std::move(xs), ctx);
  ASSERT_GT(xs.size(), 10u);
  for (size_t i = 0; i + 1 < xs.size(); ++i) {
    EXPECT_EQ(get_tokens(xs[i], "inputs").size(), 128u);
    EXPECT_EQ(get_tokens(xs[i], "targets").size(), 29u);
    EXPECT_EQ(get_tokens(xs[i], "inputs").back(), 1);
    EXPECT_EQ(get_tokens(xs[i], "targets").front(), 358);  // <extra_id_0>
  }
  EXPECT_EQ(xs.back().size(), 2u);
  // Same seed, same output; another seed, other masks.
  std::vector<Example> again = raw;
  for (const auto& s : steps) again = run(s, std::move(again), ctx);
  EXPECT_EQ(again, xs);
  PreprocessContext other{of, lengths, 6, 0, 0};
  std::vector<Example> moved = raw;
  for (const auto& s : steps) moved = run(s, std::move(moved), other);
  EXPECT_NE(moved, xs);
  // Span corruption without lengths (before the cache placeholder) is refused.
  PreprocessContext no_len{of, {}, 5, 0, 0};
  EXPECT_THROW(run(task::span_corruption(), {Example{{"targets", Tokens{5, 6}}}}, no_len),
               std::invalid_argument);
}

TEST(TaskSteps, TranslateThenTokenizeWithEos) {
  auto v = std::make_shared<ByteVocabulary>();
  const OutputFeatures of{{"inputs", test::feature(v)}, {"targets", test::feature(v)}};
  PreprocessContext ctx{of, {}, 0, 0, 0};
  auto xs = run(task::translate("en", "fr"),
                {Example{{"en", std::string("Hi")}, {"fr", std::string("Salut")}}}, ctx);
  xs = run(task::tokenize_and_append_eos(), xs, ctx);
  EXPECT_EQ(get_text(xs[0], "inputs_pretokenized"), "translate English to French: Hi");
  EXPECT_EQ(get_tokens(xs[0], "targets"),
            (Tokens{'S' + 3, 'a' + 3, 'l' + 3, 'u' + 3, 't' + 3, 1}));
}

}  // namespace
}  // namespace seqio::preprocessors
