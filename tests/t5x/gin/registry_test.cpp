// Registry: name matching (gin's partial module paths), suggestions,
// defaults, misuse.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "t5x/gin/config.h"
#include "t5x/gin/parser.h"
#include "t5x/gin/registry.h"
#include "test_util.h"

namespace t5x::gin {
namespace {

using testing::expect_gin_error;

TEST(GinRegistry, EditDistance) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("EMB_DIM", "emb_dim"), 0u);  // case-insensitive
  EXPECT_EQ(edit_distance("emb_dm", "emb_dim"), 1u);
}

TEST(GinRegistry, NearestNames) {
  const std::vector<std::string> params{"emb_dim", "mlp_dim", "head_dim", "num_heads", "dtype"};
  const auto near = nearest_names("emb_dm", params);
  ASSERT_FALSE(near.empty());
  EXPECT_EQ(near[0], "emb_dim");
  EXPECT_TRUE(nearest_names("zzzzzzzzzzzz", params).empty());
}

// gin-config (selector_map.py): a name matches the configurables whose full
// registered name (module path + name) ends with it at a dot.
TEST(GinRegistry, MatchesDottedSuffixesOfTheFullName) {
  Registry r;
  r.add("utils.DatasetConfig", {{"split", ""}}, "", "t5x.utils.DatasetConfig");
  r.add("train_script.train", {{"total_steps", ""}});
  r.add("a.Foo", {});
  r.add("b.Foo", {});
  EXPECT_EQ(r.find("utils.DatasetConfig")->name, "utils.DatasetConfig");
  EXPECT_EQ(r.find("DatasetConfig")->name, "utils.DatasetConfig");
  EXPECT_EQ(r.find("t5x.utils.DatasetConfig")->name, "utils.DatasetConfig");
  EXPECT_EQ(r.find("utils.DatasetConfig")->full_name, "t5x.utils.DatasetConfig");
  EXPECT_EQ(r.find("train")->name, "train_script.train");
  EXPECT_EQ(r.find("train_script.train")->full_name, "train_script.train");
  // Not a suffix of the registered path: a longer or different prefix.
  EXPECT_EQ(r.find("garbage.utils.DatasetConfig"), nullptr);
  EXPECT_EQ(r.find("garbage.t5x.utils.DatasetConfig"), nullptr);
  EXPECT_EQ(r.find("x.train_script.train"), nullptr);
  EXPECT_EQ(r.find("t5x.DatasetConfig"), nullptr);  // components are contiguous
  EXPECT_EQ(r.find("atasetConfig"), nullptr);       // and whole
  EXPECT_EQ(r.find("tils.DatasetConfig"), nullptr);
  EXPECT_EQ(r.find(".DatasetConfig"), nullptr);
  EXPECT_EQ(r.find(""), nullptr);
  EXPECT_EQ(r.find("Nothing"), nullptr);
  expect_gin_error([&] { r.find("Foo", SourceLocation{"x.gin", 4, 1}); },
                   {"x.gin:4:1", "'Foo' is ambiguous: a.Foo, b.Foo", "hint:", "'a.Foo' or 'b.Foo'"});
  EXPECT_EQ(r.matches("Foo").size(), 2u);
  EXPECT_EQ(r.matches("garbage.utils.DatasetConfig").size(), 0u);
  EXPECT_EQ(r.minimal_name(*r.get("utils.DatasetConfig")), "DatasetConfig");
  EXPECT_EQ(r.minimal_name(*r.get("a.Foo")), "a.Foo");
}

// selector_map.py: "if "a.b.c.d" and "c.d" are stored, matching_selectors('c.d')
// will return only ['c.d'], while matching_selectors('d') will return both."
TEST(GinRegistry, AFullNameWrittenOutMatchesOnlyItself) {
  Registry r;
  r.add("c.d", {});
  r.add("b.c.d", {}, "", "a.b.c.d");
  EXPECT_EQ(r.find("c.d")->name, "c.d");
  EXPECT_EQ(r.find("b.c.d")->name, "b.c.d");
  EXPECT_EQ(r.find("a.b.c.d")->name, "b.c.d");
  EXPECT_EQ(r.find("x.c.d"), nullptr);
  expect_gin_error([&] { r.find("d", SourceLocation{"x.gin", 1, 1}); },
                   {"'d' is ambiguous: a.b.c.d, c.d", "'b.c.d' or 'c.d'"});
  EXPECT_EQ(r.minimal_name(*r.get("c.d")), "c.d");
  EXPECT_EQ(r.minimal_name(*r.get("b.c.d")), "b.c.d");
}

TEST(GinRegistry, FullNamesAreChecked) {
  Registry r;
  r.add("utils.DatasetConfig", {}, "", "t5x.utils.DatasetConfig");
  EXPECT_THROW(r.add("utils.Other", {}, "", "t5x.utils.DatasetConfig"), std::invalid_argument);
  EXPECT_THROW(r.add("t5x.utils.DatasetConfig", {}), std::invalid_argument);  // a full name taken
  EXPECT_THROW(r.add("utils.X", {}, "", "t5x.other.X"), std::invalid_argument);
  EXPECT_THROW(r.add("X", {}, "", "t5x.utils.AX"), std::invalid_argument);
  r.add("X", {}, "", "t5x.utils.X");
  EXPECT_EQ(r.get("X")->full_name, "t5x.utils.X");
  EXPECT_EQ(r.get("t5x.utils.X"), nullptr);  // get() takes canonical names only
}

TEST(GinRegistry, UnknownNamesSuggestNearest) {
  Registry r;
  register_t5x_configurables(r);
  expect_gin_error([&] { r.lookup("network.T5Confg", SourceLocation{"m.gin", 3, 1}); },
                   {"m.gin:3:1", "unknown configurable 'network.T5Confg'",
                    "did you mean 'network.T5Config'"});
  expect_gin_error([&] { r.lookup("utils.DataSetConfg", SourceLocation{"m.gin", 1, 1}); },
                   {"did you mean 'utils.DatasetConfig'"});
  expect_gin_error([&] { r.lookup("adafactor.AdaFactr", SourceLocation{"m.gin", 1, 1}); },
                   {"did you mean 'adafactor.Adafactor'"});
  const ConfigurableSpec& spec = r.lookup("utils.SaveCheckpointConfig", {});
  expect_gin_error([&] { r.check_param(spec, "perod", SourceLocation{"m.gin", 9, 3}); },
                   {"m.gin:9:3", "has no parameter 'perod'", "did you mean 'period'"});
  expect_gin_error([&] { r.check_param(spec, "qqqqqqqqqqqqqq", SourceLocation{"m.gin", 1, 1}); },
                   {"known parameters:", "period", "keep"});
}

// An unknown module prefix on a known name says which path is registered.
TEST(GinRegistry, UnknownModulePrefixNamesTheRegisteredPath) {
  Registry r;
  register_t5x_configurables(r);
  expect_gin_error([&] { r.lookup("garbage.utils.DatasetConfig", SourceLocation{"m.gin", 1, 1}); },
                   {"m.gin:1:1", "unknown configurable 'garbage.utils.DatasetConfig'",
                    "no registered module path ends with 'garbage.utils.DatasetConfig'",
                    "registered: 'utils.DatasetConfig' (t5x.utils.DatasetConfig)"});
  expect_gin_error([&] { r.lookup("t5x.examples.decoder_only.network.T5Config", {}); },
                   {"'network.T5Config' (t5x.examples.t5.network.T5Config)"});
  expect_gin_error([&] { r.lookup("x.predict_batch_with_aux", {}); },
                   {"'models.DecoderOnlyModel.predict_batch_with_aux' "
                    "(t5x.models.DecoderOnlyModel.predict_batch_with_aux)"});
}

// t5x's names under the module paths t5x's gin files import them from.
TEST(GinRegistry, T5xFullNames) {
  Registry r;
  register_t5x_configurables(r);
  const std::vector<std::pair<const char*, const char*>> full = {
      {"network.T5Config", "t5x.examples.t5.network.T5Config"},
      {"network.Transformer", "t5x.examples.t5.network.Transformer"},
      {"network.TransformerConfig", "t5x.examples.decoder_only.network.TransformerConfig"},
      {"network.DecoderWrapper", "t5x.examples.decoder_only.network.DecoderWrapper"},
      {"models.EncoderDecoderModel", "t5x.models.EncoderDecoderModel"},
      {"models.EncoderDecoderModel.predict_batch_with_aux",
       "t5x.models.EncoderDecoderModel.predict_batch_with_aux"},
      {"models.MoeEncoderDecoderModel", "t5x.contrib.moe.models.MoeEncoderDecoderModel"},
      {"decoding.beam_search", "t5x.decoding.beam_search"},
      {"adafactor.Adafactor", "t5x.adafactor.Adafactor"},
      {"adafactor_utils.logical_factor_rules", "t5x.contrib.moe.adafactor_utils.logical_factor_rules"},
      {"optimizers.adamw", "t5x.optimizers.adamw"},
      {"optax.adamw", "optax.adamw"},
      {"utils.DatasetConfig", "t5x.utils.DatasetConfig"},
      {"checkpoints.UpcycleCheckpointer", "t5x.contrib.moe.checkpoints.UpcycleCheckpointer"},
      {"partitioning.PjitPartitioner", "t5x.partitioning.PjitPartitioner"},
      {"partitioning.MoePjitPartitioner", "t5x.contrib.moe.partitioning.MoePjitPartitioner"},
      {"trainer.Trainer", "t5x.trainer.Trainer"},
      {"seqio.SentencePieceVocabulary", "seqio.SentencePieceVocabulary"},
      {"preprocessors.random_spans_noise_mask", "t5.data.preprocessors.random_spans_noise_mask"},
      {"gin_utils.summarize_gin_config", "t5x.gin_utils.summarize_gin_config"},
      {"train_script.train", "train_script.train"},
      {"infer_script.infer", "infer_script.infer"}};
  for (const auto& [name, full_name] : full) {
    ASSERT_NE(r.get(name), nullptr) << name;
    EXPECT_EQ(r.get(name)->full_name, full_name);
  }
  // Every name resolves to itself by its canonical name, its full name and
  // its minimal name: no canonical name is ambiguous in a config that has
  // imported nothing, or only the configurable's own module (scalable_t5's
  // network is registered on import, as under gin's dynamic registration).
  const std::vector<std::string> none;
  for (const std::string& name : r.names()) {
    const ConfigurableSpec* spec = r.get(name);
    const std::vector<std::string> own = {spec->full_name.substr(0, spec->full_name.rfind('.'))};
    const std::vector<std::string>& loaded = spec->needs_import ? own : none;
    EXPECT_EQ(r.find(name, Imports{}, {}, &loaded), spec) << name;
    EXPECT_EQ(r.find(spec->full_name), spec) << name;
    EXPECT_EQ(r.find(r.minimal_name(*spec)), spec) << name;
  }
  EXPECT_EQ(r.find("examples.t5.network.T5Config")->name, "network.T5Config");
  EXPECT_EQ(r.find("T5Config", Imports{}, {}, &none)->name, "network.T5Config");
  EXPECT_THROW(r.find("T5Config"), GinError);  // gin-config, every module registered: ambiguous
  // The T5 network under t5x's GPU module path is the same configurable.
  EXPECT_EQ(r.find("t5x.contrib.gpu.t5.network.T5Config")->name, "network.T5Config");
  EXPECT_EQ(r.find("gpu.t5.network.Transformer")->name, "network.Transformer");
  // scalable_t5's: reached by suffix once its module is imported, and then
  // preferred to the T5 network's by a file that imports neither (t5x's
  // scalable_t5/t5_1_1/small.gin includes base.gin, which imports it).
  const std::vector<std::string> scalable = {"t5x.examples.scalable_t5.network"};
  EXPECT_EQ(r.find("network.T5Config", Imports{}, {}, &scalable)->name, "scalable_t5.network.T5Config");
  const std::vector<std::string> both = {"t5x.examples.t5.network", "t5x.examples.scalable_t5.network"};
  EXPECT_THROW(r.find("network.T5Config", Imports{}, {}, &both), GinError);
  EXPECT_THROW(r.lookup("scalable_t5.network.T5Config", Imports{}, {}, &none), GinError);  // not imported
  EXPECT_EQ(r.find("contrib.moe.models.MoeEncoderDecoderModel")->name, "models.MoeEncoderDecoderModel");
  EXPECT_EQ(r.find("t5x.network.T5Config"), nullptr);
  EXPECT_EQ(r.find("t5x.seqio.Evaluator"), nullptr);
  EXPECT_EQ(r.find("t5x.train_script.train"), nullptr);
  EXPECT_EQ(r.find("t5x.contrib.moe.utils.DatasetConfig"), nullptr);
  EXPECT_THROW(r.find("adamw"), GinError);  // t5x.optimizers.adamw, optax.adamw
  EXPECT_THROW(r.find("predict_batch_with_aux"), GinError);
}

// Python gin-config matches the same configurables for every name in
// testdata/python_gin_selectors.tsv (written by gin_selector_golden.py from
// gin-config's own SelectorMap, over t5x's full names, and from its
// ParseContext for names after import lines).
TEST(GinRegistry, MatchesPythonGinSelectors) {
  Registry r;
  register_t5x_configurables(r);
  std::ifstream in(std::filesystem::path(T5X_SOURCE_DIR) / "tests/t5x/gin/testdata/python_gin_selectors.tsv");
  ASSERT_TRUE(in) << "missing python_gin_selectors.tsv";
  std::vector<std::string> python_full, cpp_full;
  for (const std::string& name : r.names()) cpp_full.push_back(r.get(name)->full_name);
  std::sort(cpp_full.begin(), cpp_full.end());
  size_t queries = 0, imports = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cells.push_back(c);
    if (line.ends_with('\t')) cells.emplace_back();
    ASSERT_GE(cells.size(), 2u) << line;
    if (cells[0] == "full") {
      python_full.push_back(cells[1]);
      continue;
    }
    if (cells[0] == "import") {
      // gin-config's dynamic registration: the object its ParseContext
      // reaches for the name after these import lines (empty: none that
      // t5x.cpp registers).
      ASSERT_EQ(cells.size(), 4u) << line;
      Imports im;
      std::stringstream lines(cells[1]);
      for (std::string l; std::getline(lines, l, ';');)
        for (const Statement& st : parse_gin(l, "<import row>"))
          im.add(st.module, st.is_from, st.alias, st.where);
      const ConfigurableSpec* found = nullptr;
      try {
        found = r.find(cells[2], im);
      } catch (const GinError&) {
      }
      EXPECT_EQ(found ? found->full_name : "", cells[3]) << "'" << cells[2] << "' after " << cells[1];
      ++imports;
      continue;
    }
    ASSERT_EQ(cells.size(), 3u) << line;
    std::string got;
    for (const ConfigurableSpec* s : r.matches(cells[1])) got += (got.empty() ? "" : ",") + s->full_name;
    EXPECT_EQ(got, cells[2]) << "name '" << cells[1] << "'";
    const ConfigurableSpec* found = nullptr;
    try {
      found = r.find(cells[1]);
      EXPECT_EQ(cells[2].find(','), std::string::npos) << cells[1] << " is ambiguous in gin";
    } catch (const GinError&) {
      EXPECT_NE(cells[2].find(','), std::string::npos) << cells[1] << " is not ambiguous in gin";
    }
    if (cells[2].empty()) {
      EXPECT_EQ(found, nullptr) << cells[1];
    }
    ++queries;
  }
  EXPECT_EQ(python_full, cpp_full) << "rerun tests/t5x/gin/gin_selector_golden.py";
  EXPECT_GE(queries, 300u);
  EXPECT_GE(imports, 300u);
}

TEST(GinRegistry, GlobalStartsWithT5xNames) {
  EXPECT_TRUE(Registry::global().contains("network.T5Config"));
  EXPECT_TRUE(Registry::global().contains("train_script.train"));
}

// An import one or two letters from a module of t5x's configurables is most
// likely a typo (Python gin fails on it); a module far from all of them (a
// user's task module) is accepted quietly, as t5x.cpp needs nothing from it.
TEST(GinRegistry, MisspelledImportIsWarnedAbout) {
  const Registry& r = Registry::global();
  EXPECT_EQ(r.misspelled_module("t5x.modelz"), "t5x.models");
  EXPECT_EQ(r.misspelled_module("T5x.utils"), "t5x.utils");  // module names are case-sensitive
  EXPECT_EQ(r.misspelled_module("t5x.models"), std::nullopt);
  EXPECT_EQ(r.misspelled_module("t5x"), std::nullopt);  // a package above the modules
  EXPECT_EQ(r.misspelled_module("t5.data.mixtures"), std::nullopt);
  EXPECT_EQ(r.misspelled_module("my_project.tasks"), std::nullopt);
  Config c;
  c.parse_string("from t5x import modelz\nimport t5x.utils\nimport my_project.tasks\n", "run.gin");
  ASSERT_EQ(c.warnings().size(), 1u);
  EXPECT_NE(c.warnings()[0].find("run.gin:1:1: import of 't5x.modelz': no module of that name is known; did you "
                                 "mean 't5x.models'?"),
            std::string::npos)
      << c.warnings()[0];
}

TEST(GinRegistry, DefaultsAndMisuse) {
  Registry r;
  register_t5x_configurables(r);
  const size_t n = r.size();
  register_t5x_configurables(r);  // idempotent
  EXPECT_EQ(r.size(), n);
  const ConfigurableSpec* ada = r.find("adafactor.Adafactor");
  ASSERT_NE(ada, nullptr);
  EXPECT_DOUBLE_EQ(ada->param("decay_rate")->default_value->as_double(), 0.8);
  EXPECT_DOUBLE_EQ(ada->param("epsilon1")->default_value->as_double(), 1e-30);
  EXPECT_DOUBLE_EQ(ada->param("epsilon2")->default_value->as_double(), 1e-3);
  EXPECT_DOUBLE_EQ(ada->param("clipping_threshold")->default_value->as_double(), 1.0);
  EXPECT_EQ(ada->param("min_dim_size_to_factor")->default_value->as_int(), 128);
  EXPECT_TRUE(ada->param("beta1")->default_value->is_none());
  const ConfigurableSpec* lr = r.find("utils.create_learning_rate_scheduler");
  EXPECT_EQ(lr->param("factors")->default_value->as_string(),
            "constant * linear_warmup * rsqrt_decay");
  EXPECT_FALSE(r.find("utils.DatasetConfig")->param("batch_size")->default_value.has_value());
  EXPECT_THROW(r.add("adafactor.Adafactor", {}), std::invalid_argument);
  EXPECT_THROW(r.add("x.Y", {{"a", ""}, {"a", ""}}), std::invalid_argument);
  for (const char* name :
       {"network.T5Config", "network.Transformer", "models.EncoderDecoderModel",
        "models.DecoderOnlyModel", "adafactor.Adafactor", "optimizers.adamw",
        "utils.SaveCheckpointConfig", "utils.RestoreCheckpointConfig", "utils.CheckpointConfig",
        "utils.DatasetConfig", "partitioning.PjitPartitioner",
        "partitioning.standard_logical_axis_rules", "seqio.SentencePieceVocabulary",
        "seqio.Evaluator", "train_script.train", "utils.create_learning_rate_scheduler",
        "trainer.Trainer", "eval_script.evaluate", "infer_script.infer"})
    EXPECT_TRUE(r.contains(name)) << name;
}

// gin-config's ImportStatement.bound_name and the module it stands for
// (config_parser.py; config.py, ParseContext.process_import).
TEST(GinRegistry, ImportsBindNamesAsGinConfigDoes) {
  Imports im;
  im.add("t5x.contrib.moe.partitioning", true, "moe_partitioning");  // from a.b import c as d
  im.add("t5x.utils", true, "");                                     // from a.b import c
  im.add("t5x.examples.t5.network", false, "net");                   // import a.b.c as d
  im.add("mesh_tensorflow.transformer.utils", false, "");            // import a.b.c
  im.add("seqio", false, "");
  im.add("__main__", false, "train_script");                         // binds nothing
  im.add("__gin__.dynamic_registration", true, "");                  // binds nothing
  EXPECT_EQ(im.expand("moe_partitioning.MoePjitPartitioner").value_or(""),
            "t5x.contrib.moe.partitioning.MoePjitPartitioner");
  EXPECT_EQ(im.expand("utils.DatasetConfig").value_or(""), "t5x.utils.DatasetConfig");
  EXPECT_EQ(im.expand("net.T5Config").value_or(""), "t5x.examples.t5.network.T5Config");
  EXPECT_EQ(im.expand("mesh_tensorflow.transformer.utils.run").value_or(""),
            "mesh_tensorflow.transformer.utils.run");
  EXPECT_EQ(im.expand("seqio.Evaluator").value_or(""), "seqio.Evaluator");
  EXPECT_EQ(im.expand("utils").value_or(""), "t5x.utils");
  EXPECT_FALSE(im.expand("transformer.utils.run"));  // `import a.b.c` binds a only
  EXPECT_FALSE(im.expand("train_script.train"));
  EXPECT_FALSE(im.expand("network.T5Config"));
  EXPECT_FALSE(im.expand("DatasetConfig"));
  EXPECT_FALSE(im.expand("xutils.DatasetConfig"));
  EXPECT_EQ(im.bound().size(), 5u);
  im.add("t5x.contrib.moe.utils", true, "");  // a later import replaces the name
  EXPECT_EQ(im.expand("utils.X").value_or(""), "t5x.contrib.moe.utils.X");
  expect_gin_error([&] { im.add("__gin__.dynamic_registration", true, "d", {"i.gin", 3, 1}); },
                   {"i.gin:3:1", "do not support `as` aliasing"});
}

TEST(GinRegistry, ImportedNamesMatchFullNamesExactly) {
  Registry r;
  r.add("network.T5Config", {{"emb_dim", ""}}, "", "t5x.examples.t5.network.T5Config");
  r.add("utils.DatasetConfig", {}, "", "t5x.utils.DatasetConfig");
  r.add("train_script.train", {});
  Imports im;
  im.add("t5x.examples.scalable_t5.network", true, "");
  im.add("t5x", false, "");
  EXPECT_EQ(r.find("network.T5Config"), r.get("network.T5Config"));  // no import: suffix
  EXPECT_EQ(r.find("network.T5Config", im), nullptr);
  EXPECT_EQ(r.find("t5x.utils.DatasetConfig", im), r.get("utils.DatasetConfig"));
  EXPECT_EQ(r.find("utils.DatasetConfig", im), r.get("utils.DatasetConfig"));  // not imported
  EXPECT_EQ(r.find("train", im), r.get("train_script.train"));
  expect_gin_error([&] { r.lookup("network.T5Config", im, {"s.gin", 7, 1}); },
                   {"s.gin:7:1",
                    "unknown configurable 'network.T5Config' (imported as "
                    "t5x.examples.scalable_t5.network.T5Config)",
                    "the configurables of module 't5x.examples.scalable_t5.network' are not part of t5x.cpp",
                    "nearest registered: 't5x.examples.t5.network.T5Config'"});
  expect_gin_error([&] { r.lookup("t5x.utils.DatasetConfg", im, {}); },
                   {"(imported as t5x.utils.DatasetConfg)", "registers no 'DatasetConfg' in module 't5x.utils'",
                    "'t5x.utils.DatasetConfig'"});
}

}  // namespace
}  // namespace t5x::gin
