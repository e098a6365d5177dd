// Command-line flags: --gin_file, --gin_search_paths, --gin_bindings and
// t5x's --gin.NAME=VALUE rewrite.
#include <gtest/gtest.h>

#include "t5x/gin/flags.h"
#include "t5x/gin/parser.h"
#include "test_util.h"

namespace t5x::gin {
namespace {

using testing::expect_gin_error;
using testing::TempDir;

TEST(GinFlags, RewriteGinArg) {
  EXPECT_EQ(rewrite_gin_arg("--gin.TRAIN_STEPS=1000"), "TRAIN_STEPS = 1000");
  EXPECT_EQ(rewrite_gin_arg("--gin.MODEL_DIR='/x'"), "MODEL_DIR = '/x'");
  EXPECT_EQ(rewrite_gin_arg("--gin.MODEL_DIR=\"/x\""), "MODEL_DIR = \"/x\"");
  EXPECT_EQ(rewrite_gin_arg("--gin.MODEL_DIR=/tmp/m"), "MODEL_DIR = '/tmp/m'");  // bare string
  EXPECT_EQ(rewrite_gin_arg("--gin.MIXTURE_OR_TASK_NAME=wmt_ende"),
            "MIXTURE_OR_TASK_NAME = 'wmt_ende'");
  EXPECT_EQ(rewrite_gin_arg("--gin.X=True"), "X = True");
  EXPECT_EQ(rewrite_gin_arg("--gin.X=None"), "X = None");
  EXPECT_EQ(rewrite_gin_arg("--gin.X=1e-3"), "X = 1e-3");
  EXPECT_EQ(rewrite_gin_arg("--gin.X=gs://b/it's"), "X = \"gs://b/it's\"");
  EXPECT_EQ(rewrite_gin_arg("--gin.TASK_FEATURE_LENGTHS={'inputs': 256, 'targets': 256}"),
            "TASK_FEATURE_LENGTHS = {'inputs': 256, 'targets': 256}");
  EXPECT_EQ(rewrite_gin_arg("--gin.train/utils.DatasetConfig.batch_size=64"),
            "train/utils.DatasetConfig.batch_size = 64");
  // A numeral that does not parse stays unquoted, so that its own error shows
  // (it read "expected int, got string '99...'").
  EXPECT_EQ(rewrite_gin_arg("--gin.BATCH_SIZE=99999999999999999999999"), "BATCH_SIZE = 99999999999999999999999");
  expect_gin_error(
      [] { parse_gin(rewrite_gin_arg("--gin.BATCH_SIZE=-99999999999999999999999"), "<--gin.BATCH_SIZE>"); },
                   {"<--gin.BATCH_SIZE>:1:15", "does not fit in 64 bits"});
  EXPECT_EQ(rewrite_gin_arg("--gin.X=+"), "X = '+'");
  EXPECT_EQ(rewrite_gin_arg("--gin.X=12ab"), "X = '12ab'");
  expect_gin_error([] { rewrite_gin_arg("--gin.TRAIN_STEPS"); },
                   {"<command line>", "malformed flag '--gin.TRAIN_STEPS'",
                    "hint: gin overrides read --gin.NAME=VALUE"});
}

TEST(GinFlags, ParsesAndKeepsOtherArgs) {
  std::vector<std::string> rest;
  const GinFlags f = parse_gin_flags(
      {"train", "--gin_file=a.gin", "--gin_file", "b.gin", "--gin_search_paths=x,y",
       "--gin_search_paths", "z", "--gin.MODEL_DIR=/m", "--gin_bindings=f.x = 1",
       "--gin_bindings", "  f.y = 2", "--tfds_data_dir=/d"},
      &rest);
  EXPECT_EQ(f.files, (std::vector<std::string>{"a.gin", "b.gin"}));
  EXPECT_EQ(f.search_paths, (std::vector<std::string>{"x", "y", "z"}));
  ASSERT_EQ(f.bindings.size(), 3u);
  EXPECT_EQ(f.bindings[0].text, "MODEL_DIR = '/m'");
  EXPECT_EQ(f.bindings[0].origin, "<--gin.MODEL_DIR>");
  EXPECT_EQ(f.bindings[1].text, "f.x = 1");
  EXPECT_EQ(f.bindings[2].text, "f.y = 2");
  EXPECT_EQ(f.bindings[2].origin, "<--gin_bindings #3>");
  EXPECT_EQ(rest, (std::vector<std::string>{"train", "--tfds_data_dir=/d"}));
  expect_gin_error([] { parse_gin_flags({"--gin_file"}); }, {"--gin_file needs a value"});
}

TEST(GinFlags, LoadAppliesFilesThenBindings) {
  TempDir dir;
  dir.write("cfg/run.gin", "MODEL_DIR = %gin.REQUIRED\nSTEPS = 5\nf.dir = %MODEL_DIR\n"
                           "f.steps = %STEPS\n");
  const GinFlags flags = parse_gin_flags({"--gin.STEPS=7", "--gin_file=run.gin",
                                          "--gin_search_paths=" + (dir.path() / "cfg").string(),
                                          "--gin.MODEL_DIR=/tmp/m"});
  const Config c = load_gin_config(flags, nullptr);
  EXPECT_EQ(c.get_string("", "f", "dir"), "/tmp/m");
  EXPECT_EQ(c.get_int("", "f", "steps"), 7);  // the flag wins although it came first
  const GinFlags bad = parse_gin_flags({"--gin_file=run.gin",
                                        "--gin_search_paths=" + (dir.path() / "cfg").string(),
                                        "--gin.STEPS=[1,"});
  expect_gin_error([&] { load_gin_config(bad, nullptr); },
                   {"<--gin.STEPS>:1:9", "never closed", "hint:"});
}

}  // namespace
}  // namespace t5x::gin
