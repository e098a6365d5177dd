// Offline cache: layout, stats, identical examples on read, refusal of an
// incomplete cache.
#include "seqio/cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "seqio/errors.h"
#include "seqio/task.h"
#include "test_util.h"

namespace seqio {
namespace {

using testing::TempDir;
using testing::to_lines;
namespace fs = std::filesystem;

std::shared_ptr<Task> cached_task(const TempDir& d) {
  d.write("a-0.txt", "alpha beta\ngamma\n");
  d.write("a-1.txt", "delta epsilon zeta\n\neta\n");
  auto src = std::make_shared<TextLineDataSource>(std::map<std::string, std::vector<std::string>>{
      {"train", {d.file("a-*.txt")}}, {"validation", {d.file("a-1.txt")}}});
  auto vocab = std::make_shared<ByteVocabulary>();
  auto tokenize = Preprocessor::Map("tokenize", [](Example ex, const PreprocessContext& c) -> std::optional<Example> {
    Example out;
    out["targets"] = c.output_features.at("targets").vocabulary->encode(get_text(ex, "text"));
    out["targets_pretokenized"] = get_text(ex, "text");
    return out;
  });
  // Post-cache: appends EOS and a token drawn from the example's seed.
  auto noisy_eos = Preprocessor::Map("noisy_eos", [](Example ex, const PreprocessContext& c) -> std::optional<Example> {
    auto& t = std::get<Tokens>(ex["targets"]);
    t.push_back(static_cast<int32_t>(3 + c.seed % 250));
    t.push_back(1);
    return ex;
  });
  return std::make_shared<Task>("cache:demo", src, OutputFeatures{{"targets", Feature{vocab, true}}},
                                std::vector<Preprocessor>{tokenize, Preprocessor::CachePlaceholder(), noisy_eos});
}

TEST(Cache, WritesShardsInfoStatsAndCompleted) {
  TempDir d("cache");
  auto t = cached_task(d);
  auto res = write_cache(*t, d.file("out"), {});
  EXPECT_EQ(res.dir, d.file("out") + "/cache/demo");
  EXPECT_EQ(res.examples.at("train"), 5);
  EXPECT_EQ(res.examples.at("validation"), 3);
  fs::path dir(res.dir);
  EXPECT_TRUE(fs::exists(dir / "COMPLETED"));
  EXPECT_TRUE(fs::exists(dir / "train.tfrecord-00000-of-00002"));
  EXPECT_TRUE(fs::exists(dir / "train.tfrecord-00001-of-00002"));
  auto stats = nlohmann::json::parse(std::ifstream(dir / "stats.train.json"));
  EXPECT_EQ(stats["examples"], 5);
  EXPECT_EQ(stats["targets_tokens"], 10 + 5 + 18 + 0 + 3);  // bytes of the lines
  EXPECT_EQ(stats["targets_max_tokens"], 18);
  auto info = nlohmann::json::parse(std::ifstream(dir / "info.train.json"));
  EXPECT_EQ(info["num_shards"], 2);
  EXPECT_EQ(info["features"]["targets"]["dtype"], "int32");
  EXPECT_EQ(info["features"]["targets"]["shape"], nlohmann::json::array({nullptr}));
  EXPECT_EQ(info["features"]["targets_pretokenized"]["dtype"], "string");
  // A second write without overwrite is refused.
  EXPECT_THROW(write_cache(*t, d.file("out"), {}), DataError);
  CacheWriteOptions ow;
  ow.overwrite = true;
  EXPECT_NO_THROW(write_cache(*t, d.file("out"), ow));
}

// An output that is not a cache (a directory of other files, a file) is
// neither taken for one nor removed, with or without overwrite (bad-input
// sweep, session 78: its files were deleted, exit 0). A cache whose split
// rewrite stopped midway (no COMPLETED, only cache files) is replaced.
TEST(Cache, OutputThatIsNoCacheIsLeftAlone) {
  TempDir d("cache_not_a_cache");
  auto t = cached_task(d);
  const fs::path dir = fs::path(d.file("out")) / "cache" / "demo";
  fs::create_directories(dir / "notes");
  std::ofstream(dir / "precious.txt") << "mine\n";
  for (bool overwrite : {false, true}) {
    CacheWriteOptions o;
    o.overwrite = overwrite;
    try {
      write_cache(*t, d.file("out"), o);
      ADD_FAILURE() << "a directory of other files was replaced";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("which is not a seqio cache's file"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::exists(dir / "precious.txt"));
  }
  fs::remove_all(dir);
  std::ofstream(dir) << "a file\n";
  EXPECT_THROW(write_cache(*t, d.file("out"), {}), DataError);
  EXPECT_TRUE(fs::is_regular_file(dir));
  fs::remove(dir);
  write_cache(*t, d.file("out"), {});
  fs::remove(dir / "COMPLETED");  // a rewrite of some splits that stopped midway
  EXPECT_EQ(write_cache(*t, d.file("out"), {}).examples.at("train"), 5);
  EXPECT_TRUE(fs::exists(dir / "COMPLETED"));
}

TEST(Cache, ReadingYieldsTheSameExamples) {
  TempDir d("cache_read");
  auto t = cached_task(d);
  write_cache(*t, d.file("out"), {});
  for (bool shuffle : {false, true}) {
    DatasetOptions o;
    o.seed = 5;
    o.shuffle = shuffle;
    o.num_epochs = 2;
    o.sequence_lengths = {{"targets", 12}};
    auto fly = to_lines(take_all(*t->get_dataset(o)));
    o.use_cached = true;
    o.cache_dirs = {d.file("missing"), d.file("out")};
    auto cached = to_lines(take_all(*t->get_dataset(o)));
    if (!shuffle) {
      EXPECT_EQ(cached, fly);
    } else {
      std::sort(fly.begin(), fly.end());
      std::sort(cached.begin(), cached.end());
      EXPECT_EQ(cached, fly);
    }
  }
}

// seqio.add_global_cache_dirs (t5x's --seqio_additional_cache_dirs): found
// without DatasetOptions::cache_dirs; the error lists where it looked.
TEST(Cache, GlobalCacheDirsAreSearched) {
  TempDir d("cache_global");
  auto t = cached_task(d);
  write_cache(*t, d.file("out"), {});
  DatasetOptions o;
  o.seed = 5;
  o.shuffle = false;
  o.sequence_lengths = {{"targets", 12}};
  o.use_cached = true;
  try {
    t->get_dataset(o);
    ADD_FAILURE() << "no error without cache directories";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no completed cache under []"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--seqio_additional_cache_dirs=DIR"), std::string::npos) << e.what();
  }
  add_global_cache_dirs({d.file("missing"), d.file("out")});
  EXPECT_EQ(get_global_cache_dirs(), (std::vector<std::string>{d.file("missing"), d.file("out")}));
  EXPECT_EQ(find_cache_dir(*t, {}), d.file("out") + "/cache/demo");
  auto cached = to_lines(take_all(*t->get_dataset(o)));
  o.use_cached = false;
  EXPECT_EQ(cached, to_lines(take_all(*t->get_dataset(o))));
  set_global_cache_dirs({});
  EXPECT_FALSE(find_cache_dir(*t, {}));
}

TEST(Cache, AFailedOverwriteKeepsTheCompletedCache) {
  TempDir d("cache_keep");
  auto good = cached_task(d);
  const auto first = write_cache(*good, d.file("out"), {});
  const fs::path dir(first.dir);
  const std::string shard = (dir / "train.tfrecord-00000-of-00002").string();
  const auto size = fs::file_size(shard);
  // The same task name, whose data fails half-way through the first split.
  auto src = std::make_shared<TextLineDataSource>(std::map<std::string, std::vector<std::string>>{
      {"train", {d.file("a-*.txt")}}, {"validation", {d.file("a-1.txt")}}});
  auto failing = std::make_shared<Task>(
      "cache:demo", src, good->output_features(),
      std::vector<Preprocessor>{Preprocessor::Map("fail_on_gamma",
                                                  [](Example ex, const PreprocessContext&) -> std::optional<Example> {
                                                    if (get_text(ex, "text") == "gamma")
                                                      throw DataError("line 'gamma' is malformed");
                                                    return ex;
                                                  }),
                                Preprocessor::CachePlaceholder()});
  CacheWriteOptions ow;
  ow.overwrite = true;
  EXPECT_THROW(write_cache(*failing, d.file("out"), ow), DataError);
  ow.splits = {"train"};  // replacing one split of it fails the same way
  EXPECT_THROW(write_cache(*failing, d.file("out"), ow), DataError);
  EXPECT_TRUE(fs::exists(dir / "COMPLETED"));
  EXPECT_EQ(fs::file_size(shard), size);
  EXPECT_EQ(find_cache_dir(*good, {d.file("out")}).value_or(""), first.dir);
  // Nothing staged is left beside it.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.parent_path())) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"demo"});
  // A successful overwrite of one split keeps the other.
  ow.splits = {"validation"};
  EXPECT_EQ(write_cache(*good, d.file("out"), ow).examples.at("validation"), 3);
  EXPECT_TRUE(fs::exists(dir / "COMPLETED"));
  EXPECT_EQ(fs::file_size(shard), size);
  EXPECT_TRUE(fs::exists(dir / "info.validation.json"));
}

TEST(Cache, TaskWithoutPlaceholderIsRefused) {
  auto src = std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"train", {}}});
  Task t("no_placeholder", src, OutputFeatures{{"targets", Feature{std::make_shared<ByteVocabulary>()}}});
  TempDir d("cache_none");
  EXPECT_THROW(write_cache(t, d.file("out"), {}), DataError);
}

TEST(Cache, IncompleteCacheIsRefused) {
  TempDir d("cache_incomplete");
  auto t = cached_task(d);
  auto res = write_cache(*t, d.file("out"), {});
  fs::remove(fs::path(res.dir) / "COMPLETED");
  DatasetOptions o;
  o.use_cached = true;
  o.cache_dirs = {d.file("out")};
  try {
    t->get_dataset(o);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no completed cache"), std::string::npos) << e.what();
  }
  try {
    open_cache_source(res.dir);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("cache is incomplete (no COMPLETED marker"), std::string::npos) << e.what();
  }
}

// Damaged info/stats files (fuzz/seqio_cache_fuzzer): each is a DataError
// naming the file and the field, not a nlohmann exception, an int overflow or
// a loop over 2^31 shard names.
TEST(Cache, DamagedInfoOrStatsNameTheFileAndField) {
  TempDir d("cache_damaged");
  auto t = cached_task(d);
  const fs::path dir = write_cache(*t, d.file("out"), {}).dir;
  const std::string info = (dir / "info.train.json").string(), stats = (dir / "stats.train.json").string();
  const auto good_info = nlohmann::json::parse(std::ifstream(info));
  const auto good_stats = nlohmann::json::parse(std::ifstream(stats));
  auto expect_error = [&](const std::string& file, const nlohmann::json& j, const std::string& what) {
    std::ofstream(file) << j.dump();
    try {
      open_cache_source(dir.string());
      ADD_FAILURE() << "no error for " << j.dump();
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(file + ": " + what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rerun seqio cache --overwrite"), std::string::npos) << e.what();
    }
    std::ofstream(info) << good_info.dump();
    std::ofstream(stats) << good_stats.dump();
  };
  auto bad = good_info;
  bad["features"] = {1, 2};  // was nlohmann type_error
  expect_error(info, bad, "field 'features' is missing or not an object");
  expect_error(info, nlohmann::json::array(), "field 'features' is missing or not an object");
  bad = good_info;
  bad["features"]["targets"]["dtype"] = 7;  // was nlohmann type_error
  expect_error(info, bad, "field 'features.targets' is not {\"dtype\": NAME, \"shape\": [...]}");
  bad = good_info;
  bad["features"]["targets_pretokenized"]["dtype"] = "complex64";  // was std::invalid_argument
  expect_error(info, bad, "field 'features.targets_pretokenized.dtype': [dtype_from_name] unknown dtype 'complex64'");
  bad = good_info;
  bad["features"]["targets"]["dtype"] = "complex64";  // a sequence's dtype was not read at all
  expect_error(info, bad, "field 'features.targets.dtype': [dtype_from_name] unknown dtype 'complex64'");
  bad["features"]["targets"]["dtype"] = "string";  // was read as int32 tokens
  expect_error(info, bad, "field 'features.targets.dtype' is \"string\", but a sequence (shape [None]) is int32");
  bad = good_info;
  bad["num_shards"] = 4294967298;  // get<int>() wrapped to 2
  expect_error(info, bad, "field 'num_shards' is 4294967298; expected an integer in [0, 99999]");
  bad["num_shards"] = "2";
  expect_error(info, bad, "field 'num_shards' is \"2\"");
  auto bad_stats = good_stats;
  bad_stats["examples"] = 1e300;  // get<int64_t>() of it is undefined behaviour
  expect_error(stats, bad_stats, "field 'examples' is 1e+300; expected an integer in [0, 4611686018427387904]");
  // The restored files read again.
  EXPECT_EQ(open_cache_source(dir.string())->num_input_examples("train"), std::optional<int64_t>(5));
}

}  // namespace
}  // namespace seqio
