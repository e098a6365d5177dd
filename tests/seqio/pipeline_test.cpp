// Task.get_dataset: determinism, sharding, start/resume, threads, epochs,
// seeds, trimming and validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "seqio/errors.h"
#include "seqio/task.h"
#include "test_util.h"

namespace seqio {
namespace {

using testing::TempDir;
using testing::to_lines;
using Patterns = std::map<std::string, std::vector<std::string>>;

OutputFeatures byte_features() {
  return {{"targets", Feature{std::make_shared<ByteVocabulary>(), true}}};
}

// text -> targets bytes; "r" = a value drawn from the example's seed; drops
// every 7th id.
std::vector<Preprocessor> standard_pps() {
  return {Preprocessor::Map("filter",
                            [](Example ex, const PreprocessContext&) -> std::optional<Example> {
                              if (std::get<int64_t>(ex.at("id")) % 7 == 3) return std::nullopt;
                              return ex;
                            }),
          Preprocessor::Map("tokenize_and_draw", [](Example ex, const PreprocessContext& ctx) -> std::optional<Example> {
            ex["targets"] = ctx.output_features.at("targets").vocabulary->encode(get_text(ex, "text"));
            ex["r"] = static_cast<int64_t>(ctx.seed % 100000);
            ex["epoch"] = ctx.epoch;
            return ex;
          })};
}

std::shared_ptr<Task> memory_task(int n, std::vector<Preprocessor> pps = standard_pps()) {
  std::vector<Example> exs;
  for (int i = 0; i < n; ++i) exs.push_back(Example{{"id", int64_t{i}}, {"text", "example " + std::to_string(i)}});
  auto src = std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"train", exs}});
  return std::make_shared<Task>("mem_task", src, byte_features(), std::move(pps));
}

std::vector<std::string> run(const Task& t, DatasetOptions o) { return to_lines(take_all(*t.get_dataset(o))); }

DatasetOptions opts(uint64_t seed = 7, bool shuffle = true) {
  DatasetOptions o;
  o.seed = seed;
  o.shuffle = shuffle;
  o.block_size = 8;
  return o;
}

TEST(Pipeline, SameSeedByteIdenticalAnyThreadCount) {
  auto t = memory_task(50);
  auto o = opts();
  o.num_epochs = 2;
  auto a = run(*t, o);
  EXPECT_EQ(a.size(), 2u * (50 - 7));  // ids 3,10,17,24,31,38,45 dropped
  EXPECT_EQ(run(*t, o), a);
  for (int threads : {2, 3, 8}) {
    o.num_threads = threads;
    EXPECT_EQ(run(*t, o), a) << threads << " threads";
  }
  o.num_threads = 1;
  o.seed = 8;
  EXPECT_NE(run(*t, o), a);
}

TEST(Pipeline, UnshuffledKeepsSourceOrder) {
  auto t = memory_task(20);
  auto out = take_all(*t->get_dataset(opts(1, false)));
  std::vector<int64_t> ids;
  for (auto& e : out) ids.push_back(std::get<int64_t>(e.at("id")));
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 18, 19}));
  EXPECT_EQ(get_tokens(out[0], "targets"), ByteVocabulary().encode("example 0"));
}

TEST(Pipeline, ShuffleIsAPermutationPerEpoch) {
  auto t = memory_task(40);
  auto o = opts(3, true);
  o.num_epochs = 2;
  auto out = take_all(*t->get_dataset(o));
  ASSERT_EQ(out.size(), 2u * 34);
  std::vector<int64_t> e0, e1;
  for (size_t i = 0; i < out.size(); ++i) (i < 34 ? e0 : e1).push_back(std::get<int64_t>(out[i].at("id")));
  EXPECT_NE(e0, e1);  // reshuffled per epoch
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, e1);
  EXPECT_TRUE(std::adjacent_find(e0.begin(), e0.end()) == e0.end());
}

TEST(Pipeline, StartEqualsTailOfFullRun) {
  auto t = memory_task(30);
  auto o = opts();
  o.num_epochs = 3;
  o.num_threads = 2;
  auto full = run(*t, o);
  for (int64_t start : {0, 1, 7, 8, 23, 24, 25, 60, 74, 75, 200}) {
    auto s = o;
    s.start = start;
    auto tail = run(*t, s);
    std::vector<std::string> want(full.begin() + std::min<size_t>(start, full.size()), full.end());
    EXPECT_EQ(tail, want) << "start " << start;
  }
}

TEST(Pipeline, ResumeFromPositionEqualsTailAndRoundTripsJson) {
  auto t = memory_task(30);
  auto o = opts();
  o.num_epochs = 2;
  auto full = run(*t, o);
  for (int64_t k : {0, 3, 8, 9, 25, 26, 51, 52}) {
    auto ds = t->get_dataset(o);
    auto head = take_all(*ds, k);
    Position p = position_from_json(position_to_json(ds->position()));
    EXPECT_EQ(p, ds->position());
    EXPECT_EQ(p.stream.emitted, k);
    auto r = o;
    r.resume = p;
    auto tail = run(*t, r);
    std::vector<std::string> want(full.begin() + k, full.end());
    EXPECT_EQ(tail, want) << "k " << k;
  }
  EXPECT_THROW(position_from_json("{\"emitted\": 1}"), DataError);
}

TEST(Pipeline, ShardsPartitionExamplesExampleLevel) {
  auto t = memory_task(23);
  std::multiset<std::string> all;
  for (auto& l : run(*t, opts(5))) all.insert(l);
  std::multiset<std::string> uni;
  for (int i = 0; i < 3; ++i) {
    auto o = opts(5);
    o.shard = ShardInfo{i, 3};
    auto part = run(*t, o);
    EXPECT_GT(part.size(), 4u);
    uni.insert(part.begin(), part.end());
  }
  EXPECT_EQ(uni, all);
  // Example-level round robin: record r goes to shard r % 3.
  auto o = opts(5, false);
  o.shard = ShardInfo{1, 3};
  auto part = take_all(*t->get_dataset(o));
  for (auto& e : part) EXPECT_EQ(std::get<int64_t>(e.at("id")) % 3, 1);
}

class FileShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int f = 0; f < 4; ++f) {
      std::string s;
      for (int i = 0; i < 5; ++i) s += "f" + std::to_string(f) + "r" + std::to_string(i) + "\n";
      d_.write("part-" + std::to_string(f) + ".txt", s);
    }
  }
  std::shared_ptr<Task> task(const std::string& pattern) {
    auto src = std::make_shared<TextLineDataSource>(Patterns{{"train", {d_.file(pattern)}}});
    return std::make_shared<Task>(
        "lines", src, byte_features(),
        std::vector<Preprocessor>{Preprocessor::Map("tok", [](Example ex, const PreprocessContext& c) -> std::optional<Example> {
          ex["targets"] = c.output_features.at("targets").vocabulary->encode(get_text(ex, "text"));
          ex["r"] = static_cast<int64_t>(c.seed % 1000);
          return ex;
        })});
  }
  TempDir d_{"fileshard"};
};

TEST_F(FileShardTest, ByFileWhenEnoughFiles) {
  auto t = task("part-*.txt");
  auto o = opts(2, false);
  o.shard = ShardInfo{1, 2};
  auto out = take_all(*t->get_dataset(o));
  ASSERT_EQ(out.size(), 10u);  // files 1 and 3
  EXPECT_EQ(get_text(out[0], "text"), "f1r0");
  EXPECT_EQ(get_text(out[5], "text"), "f3r0");
  // Union of shards (shuffled) equals the unsharded multiset, seeds included.
  std::multiset<std::string> all, uni;
  for (auto& l : run(*t, opts(2))) all.insert(l);
  for (int i = 0; i < 2; ++i) {
    auto s = opts(2);
    s.shard = ShardInfo{i, 2};
    for (auto& l : run(*t, s)) uni.insert(l);
  }
  EXPECT_EQ(uni, all);
}

TEST_F(FileShardTest, ExampleLevelWhenFewerFilesThanShards) {
  auto t = task("part-*.txt");
  auto o = opts(2, false);
  o.shard = ShardInfo{4, 6};
  auto out = take_all(*t->get_dataset(o));
  std::vector<std::string> texts;
  for (auto& e : out) texts.push_back(get_text(e, "text"));
  // Records 4, 10, 16 of the concatenation f0..f3.
  EXPECT_EQ(texts, (std::vector<std::string>{"f0r4", "f2r0", "f3r1"}));
}

TEST(Pipeline, PreCacheSeedsRepeatPostCacheResample) {
  auto draw = [](const std::string& key) {
    return Preprocessor::Map("draw", [key](Example ex, const PreprocessContext& c) -> std::optional<Example> {
      ex[key] = static_cast<int64_t>(c.seed % 1000000);
      return ex;
    });
  };
  std::vector<Preprocessor> pps = standard_pps();
  pps.insert(pps.begin(), draw("pre"));
  pps.insert(pps.begin() + 1, Preprocessor::CachePlaceholder());
  pps.push_back(draw("post"));
  auto t = memory_task(10, pps);
  auto o = opts(11, false);
  o.num_epochs = 2;
  auto out = take_all(*t->get_dataset(o));
  ASSERT_EQ(out.size(), 2u * 9);
  for (size_t i = 0; i < 9; ++i) {
    EXPECT_EQ(out[i].at("pre"), out[i + 9].at("pre"));
    EXPECT_NE(out[i].at("post"), out[i + 9].at("post"));
    EXPECT_EQ(std::get<int64_t>(out[i + 9].at("epoch")), 1);
  }
}

TEST(Pipeline, BlockPreprocessorIsDeterministicAcrossThreads) {
  // Concatenates the targets of consecutive pairs inside each block.
  auto pps = standard_pps();
  pps.push_back(Preprocessor::Block("pair_concat", [](std::vector<Example> in, const PreprocessContext& c) {
    std::vector<Example> out;
    for (size_t i = 0; i < in.size(); i += 2) {
      Example e = in[i];
      auto& t = std::get<Tokens>(e["targets"]);
      if (i + 1 < in.size()) {
        const auto& u = get_tokens(in[i + 1], "targets");
        t.insert(t.end(), u.begin(), u.end());
      }
      e["block_seed"] = static_cast<int64_t>(c.seed_for(i) % 1000);
      out.push_back(std::move(e));
    }
    return out;
  }));
  auto t = memory_task(64, pps);
  auto o = opts(4);
  o.num_epochs = 2;
  auto a = run(*t, o);
  o.num_threads = 4;
  EXPECT_EQ(run(*t, o), a);
  auto s = o;
  s.start = 13;
  EXPECT_EQ(run(*t, s), std::vector<std::string>(a.begin() + 13, a.end()));
}

TEST(Pipeline, TrimsToSequenceLengthAndCounts) {
  auto t = memory_task(12);
  auto o = opts(1, false);
  o.sequence_lengths = {{"targets", 8}};
  auto ds = t->get_dataset(o);
  auto out = take_all(*ds);
  for (auto& e : out) EXPECT_LE(get_tokens(e, "targets").size(), 8u);
  EXPECT_EQ(get_tokens(out[0], "targets"), ByteVocabulary().encode("example "));
  // Kept ids 0-2, 4-9 ("example N", 9 bytes: 1 cut) and 11 (10 bytes: 2 cut).
  EXPECT_EQ(ds->stats().trimmed_examples.at("targets"), 10);
  EXPECT_EQ(ds->stats().trimmed_tokens.at("targets"), 9 * 1 + 1 * 2);
  EXPECT_EQ(ds->stats().examples_dropped, 2);  // ids 3 and 10
  o.trim_output_features = false;
  EXPECT_EQ(get_tokens(take_all(*t->get_dataset(o))[0], "targets").size(), 9u);
}

TEST(Pipeline, ValidationErrors) {
  auto none = memory_task(3, {});
  try {
    take_all(*none->get_dataset(opts()));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("output feature 'targets' is missing"), std::string::npos) << e.what();
  }
  auto wrong = memory_task(3, {Preprocessor::Map("as_text", [](Example ex, const PreprocessContext&) -> std::optional<Example> {
                                 ex["targets"] = std::string("x");
                                 return ex;
                               })});
  try {
    take_all(*wrong->get_dataset(opts()));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'targets' should be int32"), std::string::npos) << e.what();
  }
}

TEST(Pipeline, PreprocessorErrorsNameRecordOrigin) {
  TempDir d("origin");
  d.write("a.txt", "one\ntwo\nthree\n");
  auto src = std::make_shared<TextLineDataSource>(Patterns{{"train", {d.file("a.txt")}}});
  Task t("origin", src, byte_features(),
         {Preprocessor::Map("explode", [](Example ex, const PreprocessContext&) -> std::optional<Example> {
           if (get_text(ex, "text") == "two") throw std::invalid_argument("bad word");
           ex["targets"] = Tokens{5};
           return ex;
         })});
  for (int threads : {1, 3}) {
    auto o = opts(1, false);
    o.block_size = 1;
    o.num_threads = threads;
    try {
      take_all(*t.get_dataset(o));
      FAIL();
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("preprocessor 'explode', record 2 of " + d.file("a.txt") + ": bad word"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Pipeline, OptionMisuse) {
  auto t = memory_task(3);
  auto o = opts();
  o.shard = ShardInfo{2, 2};
  EXPECT_THROW(t->get_dataset(o), std::invalid_argument);
  o = opts();
  o.start = 1;
  o.resume = Position{};
  EXPECT_THROW(t->get_dataset(o), std::invalid_argument);
  for (int64_t epochs : {0, -1}) {  // read as one epoch before; nullopt is "forever"
    o = opts();
    o.num_epochs = epochs;
    try {
      t->get_dataset(o);
      ADD_FAILURE() << "num_epochs " << epochs << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("num_epochs must be >= 1, or unset to repeat forever; got " +
                                           std::to_string(epochs)),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(parse_shard_info("1/4").index, 1);
  EXPECT_THROW(parse_shard_info("4/4"), std::invalid_argument);
  EXPECT_THROW(parse_shard_info("x"), std::invalid_argument);
}

TEST(Task, NameAndPlaceholderValidation) {
  auto src = std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"train", {}}});
  EXPECT_THROW(Task("bad name!", src, byte_features()), std::invalid_argument);
  EXPECT_THROW(Task("two_caches", src, byte_features(),
                    {Preprocessor::CachePlaceholder(), Preprocessor::CachePlaceholder()}),
               std::invalid_argument);
  Task ok("a:b_c.d#1", src, byte_features(), {Preprocessor::CachePlaceholder(true)});
  EXPECT_EQ(ok.cache_subdir(), "a/b_c.d#1");
  EXPECT_TRUE(ok.requires_caching());
  EXPECT_THROW(ok.get_dataset(opts()), DataError);  // cache required but not used
}

}  // namespace
}  // namespace seqio
