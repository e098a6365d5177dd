// Config: override order, scope resolution, lazy macros, includes, typed
// getters, missing-macro errors and the operative-config round trip.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "t5x/gin/config.h"
#include "t5x/gin/parser.h"
#include "test_util.h"

namespace t5x::gin {
namespace {

using testing::expect_gin_error;
using testing::TempDir;

// A small registry so these tests do not depend on t5x's names.
Registry make_registry() {
  Registry r;
  r.add("utils.DatasetConfig", {{"batch_size", "32"}, {"split", ""}, {"shuffle", "False"},
                                {"task_feature_lengths", ""}, {"seed", "None"}},
        "", "t5x.utils.DatasetConfig");
  r.add("network.T5Config", {{"emb_dim", ""}, {"mlp_activations", ""}, {"dropout_rate", "0.1"}},
        "", "t5x.examples.t5.network.T5Config");
  r.add("train_script.train", {{"model_dir", ""}, {"total_steps", ""}, {"eval_period", ""},
                               {"train_dataset_cfg", ""}});
  r.add("models.EncoderDecoderModel", {{"z_loss", "0.0"}}, "", "t5x.models.EncoderDecoderModel");
  r.add("f", {});
  return r;
}

TEST(GinConfig, LaterBindingsOverrideEarlier) {
  Config c(nullptr);
  c.parse_string("f.x = 1\nf.y = 'a'\nf.x = 2\n", "a.gin");
  c.parse_string("f.y = 'b'\n", "<--gin.f.y>");
  EXPECT_EQ(c.get_int("", "f", "x"), 2);
  EXPECT_EQ(c.get_string("", "f", "y"), "b");
  EXPECT_EQ(c.find("", "f", "y")->where.file, "<--gin.f.y>");
  EXPECT_EQ(c.bindings().size(), 2u);
}

TEST(GinConfig, MostSpecificScopeWins) {
  Config c(nullptr);
  c.parse_string(
      "f.x = 0\n"
      "train/f.x = 1\n"
      "train/inner/f.x = 2\n"
      "f.y = 'global'\n"
      "inner/f.x = 99\n",  // 'inner' alone is not a prefix of 'train/inner'
      "s.gin");
  EXPECT_EQ(c.get_int("", "f", "x"), 0);
  EXPECT_EQ(c.get_int("train", "f", "x"), 1);
  EXPECT_EQ(c.get_int("train/inner", "f", "x"), 2);
  EXPECT_EQ(c.get_int("train/inner/deeper", "f", "x"), 2);
  EXPECT_EQ(c.get_int("eval", "f", "x"), 0);
  EXPECT_EQ(c.get_string("train/inner", "f", "y"), "global");
  EXPECT_EQ(c.get_int("inner", "f", "x"), 99);
  EXPECT_FALSE(c.has("", "f", "z"));
  EXPECT_EQ(c.bound_params("train", "f"), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(c.bound_params("", "g").empty());
  // gin-config: a scoped reference runs in its own scope, replacing the
  // caller's; an unscoped one inherits it.
  EXPECT_EQ(reference_scope("outer", "train"), "train");
  EXPECT_EQ(reference_scope("", "train"), "train");
  EXPECT_EQ(reference_scope("outer", ""), "outer");
  EXPECT_EQ(reference_scope("outer", "outer/train"), "outer/train");
}

TEST(GinConfig, MacrosResolveLazilyAndDeeply) {
  Config c(nullptr);
  c.parse_string(
      "f.lengths = %LENGTHS\n"            // used before it is defined
      "f.list = [%A, (%B, {'k': %A})]\n"
      "LENGTHS = {'inputs': %IN, 'targets': 114}\n"
      "A = %B\n"                           // a macro whose value is a macro
      "B = 7\n",
      "m.gin");
  c.parse_string("IN = 512\n", "<cl>");
  const auto d = c.get_dict("", "f", "lengths");
  EXPECT_EQ(d[0].second.as_int(), 512);
  EXPECT_EQ(c.get("", "f", "list").to_gin(), "[7, (7, {'k': 7})]");
  EXPECT_EQ(c.macro_value("A").as_int(), 7);
  // The stored binding keeps the macro, as gin prints it.
  EXPECT_EQ(c.find("", "f", "list")->value.to_gin(), "[%A, (%B, {'k': %A})]");
}

TEST(GinConfig, MissingMacroErrorNamesUseSiteAndFlag) {
  Config c(nullptr);
  c.parse_string("f.x = 1\nf.dir = %MODEL_DIR\n", "run.gin");
  expect_gin_error([&] { c.get_string("", "f", "dir"); },
                   {"run.gin:2:9", "macro 'MODEL_DIR' is not defined",
                    "hint: pass --gin.MODEL_DIR=..."});
  c.parse_string("MODEL_DIR = %gin.REQUIRED\n", "req.gin");
  expect_gin_error([&] { c.get_string("", "f", "dir"); },
                   {"run.gin:2:9", "'MODEL_DIR' is required but was not set", "req.gin:1",
                    "--gin.MODEL_DIR="});
  c.parse_string("MODEL_DIR = '/tmp/m'\n", "<--gin.MODEL_DIR>");
  EXPECT_EQ(c.get_string("", "f", "dir"), "/tmp/m");
}

// get_path: ${VAR} and ${VAR:-default} from the environment, through a
// macro; an unset VAR without a default is an error at the string's place.
TEST(GinConfig, GetPathExpandsEnvironmentVariables) {
  ::setenv("T5X_GIN_TEST_DIR", "/srv/d", 1);
  ::unsetenv("T5X_GIN_TEST_UNSET");
  Config c(nullptr);
  c.parse_string("F = '${T5X_GIN_TEST_DIR:-data}/vocab/x.model'\nf.a = %F\n"
                 "f.b = '${T5X_GIN_TEST_UNSET:-data}/v'\nf.c = '${T5X_GIN_TEST_UNSET}/v'\nf.d = 'a${b'\n",
                 "run.gin");
  EXPECT_EQ(c.get_path("", "f", "a"), "/srv/d/vocab/x.model");
  EXPECT_EQ(c.get_string("", "f", "a"), "${T5X_GIN_TEST_DIR:-data}/vocab/x.model");
  EXPECT_EQ(c.get_path("", "f", "b"), "data/v");
  expect_gin_error([&] { c.get_path("", "f", "c"); },
                   {"run.gin:4:7", "environment variable T5X_GIN_TEST_UNSET is not set",
                    "hint: set it, or give a default: ${T5X_GIN_TEST_UNSET:-DIR}"});
  expect_gin_error([&] { c.get_path("", "f", "d"); }, {"run.gin:5:7", "unclosed '${' in 'a${b'"});
  c.parse_string("f.e = 'train.tsv\\x00junk'\n", "nul.gin");
  EXPECT_EQ(c.get_string("", "f", "e"), std::string("train.tsv\0junk", 14));
  expect_gin_error([&] { c.get_path("", "f", "e"); }, {"nul.gin:1:7", "the path contains a NUL character"});
  ::unsetenv("T5X_GIN_TEST_DIR");
}

TEST(GinConfig, RequiredDoesNotReplaceAnEarlierValue) {
  Config c(nullptr);
  c.parse_string("DROPOUT_RATE = 0.0\n", "run.gin");
  c.parse_string("DROPOUT_RATE = %gin.REQUIRED\nf.rate = %DROPOUT_RATE\n", "model.gin");
  EXPECT_EQ(c.get_double("", "f", "rate"), 0.0);
  c.parse_string("DROPOUT_RATE = 0.3\n", "<cl>");  // a real value still overrides
  EXPECT_EQ(c.get_double("", "f", "rate"), 0.3);
}

TEST(GinConfig, RequiredParameterAndMacroCycle) {
  Config c(nullptr);
  c.parse_string("f.x = %gin.REQUIRED\nf.y = %P\nP = %Q\nQ = %P\n", "r.gin");
  expect_gin_error([&] { c.get("", "f", "x"); },
                   {"r.gin:1:1", "f.x is required", "hint: pass --gin.f.x="});
  expect_gin_error([&] { c.get("", "f", "y"); }, {"macro cycle: P -> Q -> P", "hint:"});
  // What `t5x config` checks before printing: the cycle is an error, the
  // missing and REQUIRED macros are not (it lists them as notes).
  expect_gin_error([&] { c.check_macro_cycles(); }, {"macro cycle: P -> Q -> P", "hint:"});
  Config d(nullptr);
  d.parse_string("M = %gin.REQUIRED\nf.x = %M\nf.y = [%N, %O]\nO = %M\nf.z = %O\n", "r.gin");
  EXPECT_NO_THROW(d.check_macro_cycles());
  d.parse_string("FOO = %FOO\ng.a = {'k': %FOO}\n", "s.gin");
  expect_gin_error([&] { d.check_macro_cycles(); }, {"s.gin:1:", "macro cycle: FOO -> FOO"});
}

TEST(GinConfig, CheckCompleteListsAllMissingMacros) {
  Config c(nullptr);
  c.parse_string(
      "MODEL_DIR = %gin.REQUIRED\nTRAIN_STEPS = %gin.REQUIRED\n"
      "t.model_dir = %MODEL_DIR\nt.total_steps = %TRAIN_STEPS\nt.model = %MODEL\n"
      "t.other = %MODEL_DIR\n",
      "p.gin");
  const auto missing = c.missing_macros();
  ASSERT_EQ(missing.size(), 3u);
  EXPECT_EQ(missing[0].name, "MODEL");
  EXPECT_FALSE(missing[0].required);
  EXPECT_EQ(missing[1].name, "MODEL_DIR");
  EXPECT_TRUE(missing[1].required);
  EXPECT_EQ(missing[1].declared.line, 1);
  EXPECT_EQ(missing[1].used.line, 3);
  EXPECT_EQ(missing[1].needed_by, "t.model_dir");
  expect_gin_error([&] { c.check_complete(); },
                   {"missing required gin macros", "MODEL (never defined)",
                    "MODEL_DIR (gin.REQUIRED at p.gin:1:1), needed by t.model_dir at p.gin:3",
                    "hint: pass --gin.MODEL=... --gin.MODEL_DIR=... --gin.TRAIN_STEPS=..."});
  c.parse_string("MODEL = 1\nMODEL_DIR = 'd'\nTRAIN_STEPS = 3\n", "<cl>");
  EXPECT_NO_THROW(c.check_complete());
}

TEST(GinConfig, TypedGettersReportBindingLocation) {
  const Registry r = make_registry();
  Config c(&r);
  c.parse_string(
      "BATCH = 'many'\n"
      "utils.DatasetConfig.batch_size = %BATCH\n"
      "utils.DatasetConfig.split = 3\n"
      "network.T5Config.mlp_activations = ('gelu', 'linear')\n"
      "train_script.train.train_dataset_cfg = @train/utils.DatasetConfig()\n",
      "typed.gin");
  expect_gin_error([&] { c.get_int("", "utils.DatasetConfig", "batch_size"); },
                   {"typed.gin:2:1", "utils.DatasetConfig.batch_size: expected int",
                    "string 'many'", "from %BATCH at typed.gin:1:9", "hint:"});
  expect_gin_error([&] { c.get_string("", "utils.DatasetConfig", "split"); },
                   {"typed.gin:3:1", "expected string, got int 3"});
  // `--gin.utils.DatasetConfig.shuffle=false` arrives as a string.
  Config flag(&r);
  flag.parse_string("utils.DatasetConfig.shuffle = 'false'\n", "flag.gin");
  expect_gin_error([&] { flag.get_bool("", "utils.DatasetConfig", "shuffle"); },
                   {"expected bool, got string 'false'", "hint: write False (gin's booleans are capitalised)"});
  const auto acts = c.get_list("", "network.T5Config", "mlp_activations");
  ASSERT_EQ(acts.size(), 2u);
  EXPECT_EQ(acts[1].as_string(), "linear");
  const Reference ref = c.get_reference("", "train_script.train", "train_dataset_cfg");
  EXPECT_EQ(ref.scope, "train");
  EXPECT_TRUE(ref.call);
  // Registry defaults fill unbound parameters; unbound without default errors.
  EXPECT_EQ(c.get_double("", "network.T5Config", "dropout_rate"), 0.1);
  EXPECT_FALSE(c.get_bool("train", "utils.DatasetConfig", "shuffle"));
  EXPECT_TRUE(c.is_none("", "utils.DatasetConfig", "seed"));
  EXPECT_FALSE(c.get_optional("", "network.T5Config", "emb_dim").has_value());
  expect_gin_error([&] { c.get_int("", "network.T5Config", "emb_dim"); },
                   {"no value bound for network.T5Config.emb_dim",
                    "--gin.network.T5Config.emb_dim=..."});
}

TEST(GinConfig, RegistryChecksNamesWhileParsing) {
  const Registry r = make_registry();
  Config c(&r);
  expect_gin_error([&] { c.parse_string("\nnetwork.T5Confg.emb_dim = 8\n", "bad.gin"); },
                   {"bad.gin:2:1", "unknown configurable 'network.T5Confg'",
                    "did you mean 'network.T5Config'"});
  expect_gin_error([&] { c.parse_string("network.T5Config:\n  emb_dm = 8\n", "bad.gin"); },
                   {"bad.gin:2:3", "'network.T5Config' has no parameter 'emb_dm'",
                    "did you mean 'emb_dim'"});
  expect_gin_error([&] { c.parse_string("X = [1, @utils.DatasetConfg()]\n", "ref.gin"); },
                   {"ref.gin:1:9", "unknown configurable 'utils.DatasetConfg'",
                    "did you mean 'utils.DatasetConfig'"});
  expect_gin_error(
      [&] { c.parse_string("train_script.train.train_dataset_cfg = {'a': @nope}\n", "ref.gin"); },
      {"ref.gin:1:46", "unknown configurable 'nope'", "check the spelling"});
  // A module path the configurable is not registered under names nothing,
  // as in gin-config ("No configurable matching ..."), in bindings, blocks
  // and references alike.
  for (const char* text : {"garbage.utils.DatasetConfig.batch_size = 3\n",
                           "garbage.utils.DatasetConfig:\n  batch_size = 3\n",
                           "X = @garbage.utils.DatasetConfig()\n"})
    expect_gin_error([&] { c.parse_string(text, "prefix.gin"); },
                     {"prefix.gin:", "unknown configurable 'garbage.utils.DatasetConfig'",
                      "registered: 'utils.DatasetConfig' (t5x.utils.DatasetConfig)"});
  expect_gin_error([&] { c.parse_string("t5x.network.T5Config.emb_dim = 8\n", "prefix.gin"); },
                   {"unknown configurable 't5x.network.T5Config'",
                    "'network.T5Config' (t5x.examples.t5.network.T5Config)"});
  EXPECT_TRUE(c.bindings().empty());
  // The full name and its dotted suffixes name the same registered configurable.
  c.parse_string("DatasetConfig.batch_size = 8\nt5x.models.EncoderDecoderModel.z_loss = 1e-4\n"
                 "train.total_steps = 10\nt5x.examples.t5.network.T5Config.emb_dim = 8\n"
                 "examples.t5.network.T5Config.dropout_rate = 0.0\n",
                 "ok.gin");
  EXPECT_EQ(c.get_int("", "network.T5Config", "emb_dim"), 8);
  EXPECT_DOUBLE_EQ(c.get_double("", "T5Config", "dropout_rate"), 0.0);
  EXPECT_EQ(c.find("", "utils.DatasetConfig", "batch_size")->configurable, "utils.DatasetConfig");
  EXPECT_EQ(c.get_int("", "DatasetConfig", "batch_size"), 8);
  EXPECT_DOUBLE_EQ(c.get_double("", "models.EncoderDecoderModel", "z_loss"), 1e-4);
  EXPECT_EQ(c.get_int("", "train_script.train", "total_steps"), 10);
  // skip_unknown keeps unknown configurables.
  LoadOptions skip;
  skip.skip_unknown = true;
  c.parse_string("other.Thing.x = 1\n", "skip.gin", skip);
  EXPECT_EQ(c.get_int("", "other.Thing", "x"), 1);
}

TEST(GinConfig, IncludesSearchPathsAndCycles) {
  TempDir dir;
  dir.write("lib/base.gin", "f.x = 1\nf.y = 'base'\n");
  dir.write("lib/size.gin", "include 'base.gin'\nf.x = 2\n");   // next to the includer
  dir.write("sp/other.gin", "f.z = 'found via search path'\n");
  const std::string top = dir.write("top.gin",
                                    "include 'lib/size.gin'\ninclude 'other.gin'\nf.y = 'top'\n");
  LoadOptions opts;
  opts.search_paths = {(dir.path() / "nothing").string(), (dir.path() / "sp").string()};
  Config c(nullptr);
  c.parse_file(top, opts);
  EXPECT_EQ(c.get_int("", "f", "x"), 2);
  EXPECT_EQ(c.get_string("", "f", "y"), "top");
  EXPECT_EQ(c.get_string("", "f", "z"), "found via search path");
  ASSERT_EQ(c.files().size(), 4u);
  EXPECT_EQ(std::filesystem::path(c.files()[2]).filename(), "base.gin");
  // A relative --gin_file is found through the search paths too.
  LoadOptions root;
  root.search_paths = {dir.str()};
  Config c2(nullptr);
  c2.parse_file("lib/size.gin", root);
  EXPECT_EQ(c2.get_int("", "f", "x"), 2);

  // gin's order: the working directory and the search paths before the
  // including file's directory, which is only the last resort.
  const std::string inc = dir.write("inc/a.gin", "include 'b.gin'\n");
  dir.write("inc/b.gin", "g.v = 'beside'\n");
  LoadOptions sp2;
  sp2.search_paths = {(dir.path() / "sp2").string()};
  Config beside(nullptr);
  beside.parse_file(inc, sp2);
  EXPECT_EQ(beside.get_string("", "g", "v"), "beside");
  dir.write("sp2/b.gin", "g.v = 'search path'\n");
  Config first(nullptr);
  first.parse_file(inc, sp2);
  EXPECT_EQ(first.get_string("", "g", "v"), "search path");

  dir.write("cyc/a.gin", "f.x = 1\ninclude 'b.gin'\n");
  dir.write("cyc/b.gin", "\n\ninclude 'a.gin'\n");
  Config c3(nullptr);
  expect_gin_error([&] { c3.parse_file((dir.path() / "cyc/a.gin").string()); },
                   {"b.gin:3:1", "include cycle", "a.gin -> ", "b.gin -> ", "hint:"});

  const std::string missing = dir.write("m.gin", "f.x = 1\ninclude 'nope.gin'\n");
  Config c4(nullptr);
  expect_gin_error([&] { c4.parse_file(missing); },
                   {"m.gin:2:1", "cannot find gin file 'nope.gin'", "--gin_search_paths"});
  Config c6(nullptr);
  expect_gin_error([&] { c6.parse_file((dir.path() / "lib/bse.gin").string()); },
                   {"cannot find gin file", "did you mean '" + (dir.path() / "lib/base.gin").string()});
  Config c5(nullptr);
  expect_gin_error([&] { c5.parse_file("does/not/exist.gin"); },
                   {"cannot find gin file 'does/not/exist.gin'", "hint:"});
  Config c7(nullptr);  // a directory is not a gin file (it said "cannot find")
  expect_gin_error([&] { c7.parse_file((dir.path() / "lib").string()); },
                   {"gin file '" + (dir.path() / "lib").string() + "' is a directory", "hint: name a .gin file"});
  Config c8(nullptr);  // a device is no gin file either (it said "cannot find")
  const std::string dev = dir.write("dev.gin", "include '/dev/null'\n");
  expect_gin_error([&] { c8.parse_file(dev); }, {"dev.gin:1:1", "'/dev/null' is not a regular file", "hint:"});
  Config c9(nullptr);
  expect_gin_error([&] { c9.parse_file(""); }, {"empty gin file name", "hint:"});
}

TEST(GinConfig, ImportsAreKeptAndDeduplicated) {
  Config c(nullptr);
  c.parse_string("from __gin__ import dynamic_registration\nimport seqio\nf.x = 1\n", "a.gin");
  c.parse_string("from __gin__ import dynamic_registration\nfrom t5x import utils\n", "b.gin");
  ASSERT_EQ(c.imports().size(), 3u);
  EXPECT_EQ(c.imports()[2], "from t5x import utils");
}

TEST(GinConfig, OperativeConfigRoundTrips) {
  const Registry r = make_registry();
  Config c(&r);
  c.parse_string(
      "from __gin__ import dynamic_registration\n"
      "import __main__ as train_script\n"
      "MODEL_DIR = %gin.REQUIRED\n"
      "LENGTHS = {'inputs': 512, 'targets': 114}\n"
      "RATE = 1e-3\n"
      "NAME = \"it's \\\"quoted\\\"\\n\"\n"
      "train_script.train:\n"
      "  model_dir = %MODEL_DIR\n"
      "  train_dataset_cfg = @train/utils.DatasetConfig()\n"
      "  eval_period = [1, (2,), {'a': None, 'b': True}, %RATE, @f]\n"
      "train/utils.DatasetConfig.task_feature_lengths = %LENGTHS\n"
      "train/utils.DatasetConfig.split = %NAME\n"
      "utils.DatasetConfig.batch_size = -3\n"
      "network.T5Config.mlp_activations = ('relu',)\n"
      "network.T5Config.dropout_rate = 0.30000000000000004\n",
      "op.gin");
  c.parse_string("MODEL_DIR = '/tmp/model'\n", "<--gin.MODEL_DIR>");
  const std::string text = c.operative_config_str();
  EXPECT_NE(text.find("from __gin__ import dynamic_registration\n"), std::string::npos);
  EXPECT_NE(text.find("# Macros:\n"), std::string::npos);
  EXPECT_NE(text.find("MODEL_DIR = '/tmp/model'\n"), std::string::npos);
  EXPECT_NE(text.find("# Parameters for train/utils.DatasetConfig:\n"), std::string::npos);
  EXPECT_NE(text.find("train_script.train.model_dir = %MODEL_DIR\n"), std::string::npos);
  EXPECT_NE(text.find("train/utils.DatasetConfig.task_feature_lengths = %LENGTHS\n"),
            std::string::npos);

  Config back(&r);
  back.parse_string(text, "config.gin");
  EXPECT_TRUE(back.equivalent(c)) << text;
  EXPECT_EQ(back.operative_config_str(), text);
  EXPECT_EQ(back.get_string("train", "utils.DatasetConfig", "split"), "it's \"quoted\"\n");

  // A changed value breaks equivalence (the check can fail).
  back.parse_string("utils.DatasetConfig.batch_size = 4\n", "<cl>");
  EXPECT_FALSE(back.equivalent(c));

  TempDir dir;
  const std::string model_dir = (dir.path() / "model" / "run1").string();
  c.write_operative_config(model_dir);
  std::ifstream in(std::filesystem::path(model_dir) / "config.gin");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), text);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(model_dir) / "config.gin.tmp"));
}

TEST(GinConfig, ParseConfigFilesAndBindings) {
  TempDir dir;
  const std::string a = dir.write("a.gin", "f.x = 1\nf.y = 2\n");
  const std::string b = dir.write("b.gin", "f.y = 3\n");
  const Config c = parse_config_files_and_bindings({a, b}, {"f.x = 10", "f.z = %Z\nZ = 'z'"}, {},
                                                   nullptr);
  EXPECT_EQ(c.get_int("", "f", "x"), 10);
  EXPECT_EQ(c.get_int("", "f", "y"), 3);
  EXPECT_EQ(c.get_string("", "f", "z"), "z");
  EXPECT_EQ(c.find("", "f", "x")->where.file, "<--gin_bindings #1>");
}

// Import lines bind names as gin-config's dynamic registration does: a
// name whose first component was imported means the module it was imported
// as, and must name a configurable registered under exactly that path.
Registry make_import_registry() {
  Registry r = make_registry();
  r.add("partitioning.MoePjitPartitioner", {{"num_partitions", "None"}}, "",
        "t5x.contrib.moe.partitioning.MoePjitPartitioner");
  r.add("partitioning.PjitPartitioner", {{"num_partitions", "None"}}, "",
        "t5x.partitioning.PjitPartitioner");
  r.add("seqio.SentencePieceVocabulary", {{"sentencepiece_model_file", ""}});
  return r;
}

TEST(GinConfig, ImportAliasesResolveNames) {
  const Registry r = make_import_registry();
  Config c(&r);
  c.parse_string(
      "from __gin__ import dynamic_registration\n"
      "import __main__ as train_script\n"
      "import seqio\n"
      "from t5x.contrib.moe import partitioning as moe_partitioning\n"
      "from t5x import utils\n"
      "import t5x.examples.t5.network as net\n"
      "import t5x.models\n"
      "moe_partitioning.MoePjitPartitioner.num_partitions = 2\n"
      "utils.DatasetConfig.batch_size = 8\n"
      "net.T5Config.emb_dim = 16\n"
      "t5x.models.EncoderDecoderModel.z_loss = 1e-4\n"
      "train_script.train.model_dir = '/m'\n"
      "seqio.SentencePieceVocabulary.sentencepiece_model_file = 'v.model'\n"
      "PART = @moe_partitioning.MoePjitPartitioner()\n"
      "train_script.train.eval_period = [@utils.DatasetConfig(), {'p': @partitioning.PjitPartitioner}]\n",
      "imports.gin");
  EXPECT_EQ(c.get_int("", "partitioning.MoePjitPartitioner", "num_partitions"), 2);
  EXPECT_EQ(c.find("", "MoePjitPartitioner", "num_partitions")->configurable,
            "partitioning.MoePjitPartitioner");
  EXPECT_EQ(c.get_int("", "utils.DatasetConfig", "batch_size"), 8);
  EXPECT_EQ(c.get_int("", "network.T5Config", "emb_dim"), 16);
  EXPECT_DOUBLE_EQ(c.get_double("", "models.EncoderDecoderModel", "z_loss"), 1e-4);
  EXPECT_EQ(c.get_string("", "train_script.train", "model_dir"), "/m");
  EXPECT_EQ(c.get_string("", "seqio.SentencePieceVocabulary", "sentencepiece_model_file"), "v.model");
  // References through an import are stored by a name that finds the same
  // configurable without imports (the canonical name here); others as written.
  EXPECT_EQ(c.macro_value("PART").as_reference().name, "partitioning.MoePjitPartitioner");
  const auto period = c.get_list("", "train_script.train", "eval_period");
  EXPECT_EQ(period[0].as_reference().name, "utils.DatasetConfig");
  EXPECT_EQ(period[1].as_dict()[0].second.as_reference().name, "partitioning.PjitPartitioner");
  // The operative config reads back to the same configuration.
  Config back(&r);
  back.parse_string(c.operative_config_str(), "config.gin");
  EXPECT_TRUE(back.equivalent(c)) << c.operative_config_str();
}

TEST(GinConfig, ImportedReferenceKeepsItsFullNameWhenTheShortOneIsAmbiguous) {
  Registry r;
  r.add("network.T5Config", {{"emb_dim", ""}}, "", "t5x.examples.t5.network.T5Config");
  r.add("decoder_only.network.T5Config", {{"emb_dim", ""}}, "",
        "t5x.examples.decoder_only.network.T5Config");
  r.add("f", {{"x", ""}});
  Config c(&r);
  c.parse_string("from t5x.examples.t5 import network\n"
                 "network.T5Config.emb_dim = 3\nf.x = @network.T5Config()\n", "d.gin");
  EXPECT_EQ(c.find("", "network.T5Config", "emb_dim")->configurable, "network.T5Config");
  EXPECT_EQ(c.get_reference("", "f", "x").name, "t5x.examples.t5.network.T5Config");
  c.parse_string("from t5x.examples.decoder_only import network\nf.x = @network.T5Config()\n", "o.gin");
  EXPECT_EQ(c.get_reference("", "f", "x").name, "decoder_only.network.T5Config");
  expect_gin_error([&] { c.parse_string("network.T5Config.emb_dim = 3\n", "amb.gin"); },
                   {"'network.T5Config' is ambiguous"});
}

TEST(GinConfig, ImportedModuleMustRegisterTheName) {
  const Registry r = make_import_registry();
  // t5x's scalable_t5 network is not t5x.cpp's t5 network, although
  // `network.T5Config` is a suffix of the latter's full name.
  Config c(&r);
  expect_gin_error(
      [&] {
        c.parse_string("from t5x.examples.scalable_t5 import network\n"
                       "network.T5Config.scan_layers = True\n", "scalable.gin");
      },
      {"scalable.gin:2:1",
       "unknown configurable 'network.T5Config' (imported as t5x.examples.scalable_t5.network.T5Config)",
       "module 't5x.examples.scalable_t5.network' are not part of t5x.cpp",
       "'t5x.examples.t5.network.T5Config'"});
  // A known module without that name; references are checked the same way.
  expect_gin_error(
      [&] { c.parse_string("from t5x import utils\nX = @utils.DatasetConfg()\n", "ref.gin"); },
      {"ref.gin:2:5", "unknown configurable 'utils.DatasetConfg' (imported as t5x.utils.DatasetConfg)",
       "t5x.cpp registers no 'DatasetConfg' in module 't5x.utils'", "'t5x.utils.DatasetConfig'"});
  // `import a.b` binds `a`, meaning the package a: `t5x.X` must be a full name.
  expect_gin_error(
      [&] { c.parse_string("import t5x.utils\nt5x.DatasetConfig.batch_size = 1\n", "pkg.gin"); },
      {"unknown configurable 't5x.DatasetConfig' (imported as t5x.DatasetConfig)"});
  EXPECT_TRUE(c.bindings().empty());
  // skip_unknown skips it, keeping the full path (it does not land on
  // network.T5Config).
  LoadOptions skip;
  skip.skip_unknown = true;
  c.parse_string("from t5x.examples.scalable_t5 import network\n"
                 "network.T5Config.scan_layers = True\n"
                 "X = @network.T5Config()\n", "scalable.gin", skip);
  EXPECT_FALSE(c.has("", "network.T5Config", "scan_layers"));
  ASSERT_EQ(c.bindings().size(), 1u);
  EXPECT_EQ(c.bindings()[0].configurable, "t5x.examples.scalable_t5.network.T5Config");
  EXPECT_EQ(c.macro_value("X").as_reference().name, "t5x.examples.scalable_t5.network.T5Config");
  // Unknown parameters of known configurables still fail under skip_unknown.
  expect_gin_error(
      [&] { c.parse_string("from t5x import utils\nutils.DatasetConfig.nope = 1\n", "p.gin", skip); },
      {"has no parameter 'nope'"});
}

TEST(GinConfig, ImportsApplyToTheTextTheyAreWrittenIn) {
  const Registry r = make_import_registry();
  TempDir dir;
  // The included file does not see its includer's import (gin-config gives
  // each file its own parse context), so its `network.T5Config` matches by
  // suffix; the includer's later lines do see it.
  dir.write("inner.gin", "network.T5Config.emb_dim = 4\n");
  const std::string top = dir.write(
      "top.gin", "from t5x.examples.scalable_t5 import network\ninclude 'inner.gin'\n");
  LoadOptions opts;
  opts.search_paths = {dir.str()};
  Config c(&r);
  c.parse_file(top, opts);
  EXPECT_EQ(c.get_int("", "network.T5Config", "emb_dim"), 4);
  // Nor does an import in an included file reach the includer.
  dir.write("imp.gin", "from t5x.examples.scalable_t5 import network\n");
  const std::string top2 = dir.write("top2.gin", "include 'imp.gin'\nnetwork.T5Config.emb_dim = 5\n");
  Config c2(&r);
  c2.parse_file(top2, opts);
  EXPECT_EQ(c2.get_int("", "network.T5Config", "emb_dim"), 5);
  // Each parse_string starts afresh; command-line bindings share one context.
  Config c3(&r);
  c3.parse_string("from t5x.contrib.moe import partitioning\n", "a");
  c3.parse_string("partitioning.PjitPartitioner.num_partitions = 1\n", "b");
  EXPECT_EQ(c3.get_int("", "partitioning.PjitPartitioner", "num_partitions"), 1);
  expect_gin_error(
      [&] {
        parse_config_files_and_bindings(
            {}, {"from t5x.contrib.moe import partitioning",
                 "partitioning.PjitPartitioner.num_partitions = 1"}, {}, &r);
      },
      {"<--gin_bindings #2>:1:1", "unknown configurable 'partitioning.PjitPartitioner' "
                                  "(imported as t5x.contrib.moe.partitioning.PjitPartitioner)",
       "registers no 'PjitPartitioner' in module 't5x.contrib.moe.partitioning'"});
  // A later import of the same name replaces the earlier one.
  Config c4(&r);
  c4.parse_string("from t5x.contrib.moe import partitioning\nfrom t5x import partitioning\n"
                  "partitioning.PjitPartitioner.num_partitions = 3\n", "later.gin");
  EXPECT_EQ(c4.get_int("", "PjitPartitioner", "num_partitions"), 3);
}

TEST(GinConfig, OperativeConfigWritesFullNamesWhereImportsDisagree) {
  const Registry r = make_import_registry();
  Config c(&r);
  c.parse_string("from t5x import models\nmodels.EncoderDecoderModel.z_loss = 0.5\n"
                 "train_script.train.eval_period = @models.EncoderDecoderModel\n", "a.gin");
  // Another file's `models` is another module; each file's names are its own.
  c.parse_string("from __gin__ import dynamic_registration\n"
                 "from t5x.contrib.moe import models\nfrom t5x import utils\n"
                 "utils.DatasetConfig.batch_size = 2\n", "b.gin");
  const std::string text = c.operative_config_str();
  EXPECT_EQ(text.rfind("from __gin__ import dynamic_registration\n", 0), 0u) << text;
  EXPECT_NE(text.find("t5x.models.EncoderDecoderModel.z_loss = 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("= @t5x.models.EncoderDecoderModel\n"), std::string::npos) << text;
  // gin-config resolves `t5x.` (and t5x's script, `train_script`) only
  // through an import under dynamic registration.
  EXPECT_NE(text.find("from t5x import utils\nimport t5x.models\nimport __main__ as train_script\n\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("\nutils.DatasetConfig.batch_size = 2\n"), std::string::npos) << text;
  Config back(&r);
  back.parse_string(text, "config.gin");
  EXPECT_TRUE(back.equivalent(c)) << text;
}

TEST(GinConfig, GinImportsThatGinRejects) {
  Config c(nullptr);
  expect_gin_error([&] { c.parse_string("from __gin__ import dynamic_registration as d\n", "g.gin"); },
                   {"g.gin:1:1", "__gin__ imports do not support `as` aliasing"});
  expect_gin_error([&] { c.parse_string("from __gin__ import other\n", "g.gin"); },
                   {"unknown __gin__ feature 'other'"});
}

}  // namespace
}  // namespace t5x::gin
