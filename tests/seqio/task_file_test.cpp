// Tasks and Mixtures declared in gin (src/t5x/task_file): the same examples as
// the same tasks written in C++, and named errors for malformed task files.
#include "t5x/task_file/task_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "seqio/batching.h"
#include "seqio/feature_converters/feature_converters.h"
#include "seqio/mixture.h"
#include "seqio/preprocessors/task_steps.h"
#include "seqio/registration.h"
#include "test_util.h"

namespace {

namespace pt = seqio::preprocessors::task;
using seqio::testing::TempDir;

// Every example of a task or mixture (shuffled, trimmed, two epochs) as JSON lines.
std::vector<std::string> read_all(const std::string& name, const std::string& split = "train") {
  seqio::DatasetOptions o;
  o.split = split;
  o.shuffle = true;
  o.seed = 7;
  o.num_epochs = 2;
  o.sequence_lengths = {{"inputs", 24}, {"targets", 16}};
  o.block_size = 5;
  auto ds = seqio::get_dataset(name, o);
  std::vector<seqio::Example> out;
  for (seqio::Example ex; ds->next(ex);) out.push_back(ex);
  return seqio::testing::to_lines(out);
}

// The trainer's view: packed EncDec batches of 4 rows, as JSON lines.
std::vector<std::string> read_batches(const std::string& name) {
  const seqio::SequenceLengths lengths{{"inputs", 24}, {"targets", 16}};
  auto converter = seqio::make_feature_converter("enc_dec");
  auto input = [&](const std::optional<seqio::Position>&) {
    seqio::DatasetOptions o;
    o.shuffle = true;
    o.seed = 11;
    o.sequence_lengths = lengths;
    return seqio::get_dataset(name, o);
  };
  auto convert = [&](const std::vector<seqio::Example>& w) { return (*converter)(w, lengths); };
  seqio::BatchedDataset batches(input, convert, 8 * converter->packing_window(lengths), 4);
  std::vector<std::string> out;
  for (std::vector<seqio::Example> b; batches.next(b);) {
    auto lines = seqio::testing::to_lines(b);
    out.insert(out.end(), lines.begin(), lines.end());
  }
  return out;
}

void reset_registries() {
  seqio::TaskRegistry::reset();
  seqio::MixtureRegistry::reset();
}

// The C++ counterpart of gpl3_tasks.gin's gpl3_paragraphs_copy and gpl3_copy_mix
// (gpl3_lm and gpl3_lines_copy are register_builtin_tasks()' own).
void register_cpp_copy_mix() {
  const std::string root = seqio::data_root() + "/tests/data/seqio/";
  auto vocab = seqio::make_vocabulary("sentencepiece:" + seqio::data_root() +
                                      "/tests/golden/seqio/vocab/spm1000.model:extra_ids=100");
  auto paragraphs = std::make_shared<seqio::JsonlDataSource>(
      std::map<std::string, std::vector<std::string>>{{"train", {root + "gpl3_paragraphs.train.jsonl"}},
                                                      {"validation", {root + "gpl3_paragraphs.validation.jsonl"}}},
      std::map<std::string, seqio::DType>{{"id", seqio::DType::kInt64}, {"text", seqio::DType::kString}});
  seqio::TaskRegistry::add(std::make_shared<seqio::Task>(
      "gpl3_paragraphs_copy", paragraphs, seqio::OutputFeatures{{"inputs", {vocab}}, {"targets", {vocab}}},
      std::vector<seqio::Preprocessor>{pt::rekey({{"inputs", "text"}, {"targets", "text"}}), pt::tokenize(),
                                       seqio::Preprocessor::CachePlaceholder(), pt::append_eos_after_trim()}));
  seqio::MixtureRegistry::add(std::make_shared<seqio::Mixture>(
      "gpl3_copy_mix", std::vector<seqio::MixtureEntry>{{"gpl3_lines_copy", 2.0}, {"gpl3_paragraphs_copy", 1.0}}));
}

TEST(TaskFile, DeclaredTasksAndMixtureEqualTheCppOnes) {
  reset_registries();
  seqio::register_builtin_tasks();
  register_cpp_copy_mix();
  const std::vector<std::string> names{"gpl3_lm", "gpl3_lines_copy", "gpl3_paragraphs_copy", "gpl3_copy_mix"};
  std::map<std::string, std::vector<std::string>> cpp;
  for (const auto& n : names) cpp[n] = read_all(n);
  const auto cpp_batches = read_batches("gpl3_copy_mix");
  const auto cpp_metrics = seqio::TaskRegistry::get("gpl3_lines_copy")->metric_names();

  reset_registries();
  const auto loaded = t5x::task_file::load_task_file("tests/data/seqio/gpl3_tasks.gin");
  EXPECT_EQ(loaded, (std::vector<std::string>{"gpl3_lm", "gpl3_lines_copy", "gpl3_paragraphs_copy", "gpl3_copy_mix"}));
  for (const auto& n : names) {
    const auto declared = read_all(n);
    EXPECT_GT(declared.size(), 20u) << n;
    EXPECT_EQ(declared, cpp[n]) << n;
  }
  const auto batches = read_batches("gpl3_copy_mix");
  EXPECT_GE(batches.size(), 40u);
  EXPECT_EQ(batches, cpp_batches);
  EXPECT_EQ(seqio::TaskRegistry::get("gpl3_lines_copy")->metric_names(), cpp_metrics);
  EXPECT_TRUE(seqio::TaskRegistry::get("gpl3_paragraphs_copy")->supports_caching());
  const auto mix = seqio::MixtureRegistry::get("gpl3_copy_mix");
  EXPECT_DOUBLE_EQ(mix->get_rate(*seqio::TaskRegistry::get("gpl3_lines_copy")), 2.0);
  EXPECT_DOUBLE_EQ(mix->get_rate(*seqio::TaskRegistry::get("gpl3_paragraphs_copy")), 1.0);

  // Reading the same file again registers nothing and is no error.
  EXPECT_TRUE(t5x::task_file::load_task_file("tests/data/seqio/gpl3_tasks.gin").empty());
  reset_registries();
}

TEST(TaskFile, ExampleTaskFileReadsTheShippedTsv) {
  reset_registries();
  t5x::task_file::load_task_file("examples/my_tsv/tasks.gin");
  seqio::DatasetOptions o;
  o.split = "validation";
  o.shuffle = false;
  auto ds = seqio::get_dataset("my_tsv_en_es", o);
  seqio::Example ex;
  ASSERT_TRUE(ds->next(ex));
  EXPECT_EQ(seqio::get_text(ex, "inputs_pretokenized"), "translate English to Spanish: The cat drinks milk.");
  EXPECT_EQ(seqio::get_text(ex, "targets_pretokenized"), "El gato bebe leche.");
  auto es_en = seqio::get_dataset("my_tsv_es_en", o);
  ASSERT_TRUE(es_en->next(ex));
  EXPECT_EQ(seqio::get_text(ex, "inputs_pretokenized"), "El gato bebe leche.");
  // @t5.evaluation.metrics.bleu is T5's: sacrebleu with the intl tokenizer.
  EXPECT_EQ(seqio::TaskRegistry::get("my_tsv_es_en")->metric_names(), std::vector<std::string>{"bleu_intl"});
  EXPECT_EQ(seqio::MixtureRegistry::get("my_tsv_both")->tasks().size(), 2u);
  reset_registries();
}

// ---- errors ----------------------------------------------------------------

// The GinError message of loading `text` as a task file named task.gin.
std::string load_error(const std::string& text) {
  reset_registries();
  TempDir dir("task_file");
  const std::string path = dir.write("task.gin", text);
  try {
    t5x::task_file::load_task_file(path);
  } catch (const t5x::gin::GinError& e) {
    reset_registries();
    return std::string(e.what()).replace(0, dir.path().string().size() + 1, "");
  }
  reset_registries();
  return "no error";
}

const std::string kGood =
    "seqio.Feature.vocabulary = 'sentencepiece:tests/golden/seqio/vocab/spm1000.model'\n"
    "t/seqio.Task:\n"
    "  source = @seqio.TsvDataSource()\n"
    "  output_features = {'inputs': @seqio.Feature(), 'targets': @seqio.Feature()}\n"
    "  preprocessors = [@seqio.preprocessors.tokenize]\n"
    "t/seqio.TsvDataSource:\n"
    "  split_to_filepattern = {'train': 'examples/my_tsv/train.tsv'}\n"
    "  field_names = ['inputs', 'targets']\n";

std::string with(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// Each of `parts` occurs in the message `e`.
void expect_has(const std::string& e, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(e.find(p), std::string::npos) << "'" << p << "' not in: " << e;
}

// Every name of task files and of t5x resolves to itself as gin-config
// would resolve it (a dotted suffix of one full name only).
TEST(TaskFile, RegisteredNamesResolveToThemselves) {
  t5x::gin::Registry r;
  t5x::gin::register_t5x_configurables(r);
  t5x::task_file::register_configurables(r);
  // In a config that imported nothing (scalable_t5's network, registered
  // on import, is no competitor then: docs/gin.md).
  const std::vector<std::string> none;
  for (const std::string& name : r.names()) {
    const t5x::gin::ConfigurableSpec* spec = r.get(name);
    if (!spec->needs_import) {
      EXPECT_EQ(r.find(name, t5x::gin::Imports{}, {}, &none), spec) << name;
    }
    EXPECT_EQ(r.find(spec->full_name), spec) << name;
  }
  EXPECT_EQ(r.find("preprocessors.rekey")->name, "seqio.preprocessors.rekey");
  EXPECT_EQ(r.find("data.preprocessors.translate")->name, "t5.data.preprocessors.translate");
  EXPECT_EQ(r.find("garbage.preprocessors.rekey"), nullptr);
  EXPECT_EQ(r.find("seqio.t5.data.preprocessors.translate"), nullptr);
}

TEST(TaskFile, TheGoodFileLoads) { EXPECT_EQ(load_error(kGood), "no error"); }

// seqio's rekey maps a None old key to an empty feature (C4's
// {'inputs': None, 'targets': 'text'}); before, it was an error.
TEST(TaskFile, RekeyTakesNoneAsAnEmptyFeature) {
  reset_registries();
  TempDir dir("task_file");
  t5x::task_file::load_task_file(dir.write(
      "task.gin", with("preprocessors = [@seqio.preprocessors.tokenize]",
                       "preprocessors = [@seqio.preprocessors.rekey, @seqio.preprocessors.tokenize]") +
                      "t/seqio.preprocessors.rekey.key_map = {'inputs': None, 'targets': 'inputs'}\n"));
  seqio::DatasetOptions o;
  auto ds = seqio::get_dataset("t", o);
  seqio::Example ex;
  ASSERT_TRUE(ds->next(ex));
  EXPECT_TRUE(std::get<seqio::Tokens>(ex.at("inputs")).empty());
  EXPECT_FALSE(std::get<seqio::Tokens>(ex.at("targets")).empty());
  reset_registries();
}

// The same step twice with different arguments: each a scoped reference,
// which runs in its own scope as in gin-config (`@t/a/...` reads `t/a/...`
// bindings; `@b/...` reads `b/...`, never the task's `t/b/...`).
TEST(TaskFile, ScopedPreprocessorReferencesRunInTheirOwnScope) {
  reset_registries();
  TempDir dir("task_file");
  seqio::DatasetOptions in_order;
  in_order.shuffle = false;
  t5x::task_file::load_task_file(dir.write("plain.gin", kGood));
  seqio::Example plain;
  ASSERT_TRUE(seqio::get_dataset("t", in_order)->next(plain));
  reset_registries();
  t5x::task_file::load_task_file(dir.write(
      "task.gin",
      with("preprocessors = [@seqio.preprocessors.tokenize]",
           "preprocessors = [@t/a/seqio.preprocessors.rekey, @b/seqio.preprocessors.rekey,\n"
           "                   @seqio.preprocessors.tokenize]") +
          "t/a/seqio.preprocessors.rekey.key_map = {'inputs': 'targets', 'targets': 'inputs'}\n"  // swap
          "b/seqio.preprocessors.rekey.key_map = {'inputs': 'inputs', 'targets': 'inputs'}\n"
          "t/b/seqio.preprocessors.rekey.key_map = {'inputs': None, 'targets': 'targets'}\n"));  // not read
  seqio::Example ex;
  ASSERT_TRUE(seqio::get_dataset("t", in_order)->next(ex));
  const auto& targets = std::get<seqio::Tokens>(plain.at("targets"));
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(std::get<seqio::Tokens>(ex.at("inputs")), targets);
  EXPECT_EQ(std::get<seqio::Tokens>(ex.at("targets")), targets);
  reset_registries();
}

TEST(TaskFile, UnknownPreprocessorNamesTheNearest) {
  const auto e = load_error(with("@seqio.preprocessors.tokenize", "@seqio.preprocessors.tokenise"));
  expect_has(e, {"task.gin:5:", "seqio.preprocessors.tokenise", "seqio.preprocessors.tokenize"});
}

TEST(TaskFile, AConfigurableThatIsNoPreprocessorIsRefused) {
  const auto e = load_error(with("@seqio.preprocessors.tokenize", "@seqio.preprocessors.tokenize, @seqio.Feature()"));
  expect_has(e, {"task.gin:5:", "task 't': preprocessors[1]: 'seqio.Feature' is not a preprocessor"});
  EXPECT_NE(e.find("seqio.preprocessors.rekey"), std::string::npos) << e;  // the list of valid names
}

TEST(TaskFile, UnknownSourceTypeNamesTheNearest) {
  auto e = load_error(with("source = @seqio.TsvDataSource()", "source = @seqio.TsvSource()"));
  expect_has(e, {"task.gin:3:", "seqio.TsvDataSource"});
  e = load_error(with("source = @seqio.TsvDataSource()", "source = @seqio.Feature()"));
  expect_has(e, {"task 't': source: 'seqio.Feature' is not a source", "sources: seqio.JsonlDataSource, seqio.TFExampleDataSource"});
}

TEST(TaskFile, MissingSplitPatternsAndFilesAreNamed) {
  auto e = load_error(with("{'train': 'examples/my_tsv/train.tsv'}", "{'train': []}"));
  expect_has(e, {"task.gin:7:", "split_to_filepattern['train'] has no file pattern"});
  e = load_error(with("{'train': 'examples/my_tsv/train.tsv'}", "{}"));
  expect_has(e, {"names no split"});
  e = load_error(with("examples/my_tsv/train.tsv", "examples/my_tsv/tran.tsv"));
  expect_has(e, {"task.gin:7:", "split 'train': no file matches 'examples/my_tsv/tran.tsv'"});
  // A pattern naming a directory exists: it is named as one, not as missing.
  e = load_error(with("examples/my_tsv/train.tsv", "examples/my_tsv"));
  expect_has(e, {"task.gin:7:", "split 'train': 'examples/my_tsv' is a directory, not a file", "examples/my_tsv/*.tsv"});
  // A device or FIFO is named as what it is (it was called a directory).
  e = load_error(with("examples/my_tsv/train.tsv", "/dev/zero"));
  expect_has(e, {"task.gin:7:", "split 'train': '/dev/zero' is not a regular file (a character device)",
                 "hint: name the data files (regular files) of the split"});
  {
    TempDir fifo_dir("task_file_fifo");
    const std::string fifo = (fifo_dir.path() / "train.tsv").string();
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    e = load_error(with("examples/my_tsv/train.tsv", fifo));
    EXPECT_NE(e.find("split 'train': '" + fifo + "' is not a regular file (a FIFO)"), std::string::npos) << e;
  }
  // A split the task does not have: the pipeline names it and the ones it has.
  reset_registries();
  TempDir dir("task_file");
  t5x::task_file::load_task_file(dir.write("task.gin", kGood));
  seqio::DatasetOptions o;
  o.split = "validation";
  try {
    seqio::get_dataset("t", o);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("no split 'validation' (its splits: train)"), std::string::npos) << ex.what();
  }
  reset_registries();
}

TEST(TaskFile, WrongArgumentTypesAreNamed) {
  auto e = load_error(with("field_names = ['inputs', 'targets']", "field_names = 'inputs'"));
  expect_has(e, {"task.gin:8:", "field_names"});
  e = load_error(kGood + "t/seqio.preprocessors.rekey.key_map = ['inputs']\n" +
                 "t/seqio.Task.preprocessors = [@seqio.preprocessors.rekey]\n");
  expect_has(e, {"task.gin:9:", "key_map"});
  e = load_error(kGood + "t/seqio.Task.preprocessors = ['tokenize']\n");
  expect_has(e, {"preprocessors[0]: expected a preprocessor reference (@name)"});
  e = load_error(kGood + "t/seqio.preprocessors.tokenize.copy_pretokenized = 'yes'\n");
  expect_has(e, {"task.gin:9:", "copy_pretokenized"});
  e = load_error(kGood + "t/seqio.preprocessors.tokenize.copy_pretokenised = True\n");
  expect_has(e, {"task.gin:9:"});
  EXPECT_NE(e.find("copy_pretokenized"), std::string::npos) << e;  // the nearest parameter
}

// Bad-input sweep, session 78: ['inputs', 'inputs'] read the second column
// under both names' one; a nan or infinite span corruption setting passed
// the reader and failed (or ran) at the first example, unnamed.
TEST(TaskFile, DuplicateColumnsAndNoiseSettingsAreNamed) {
  auto e = load_error(with("field_names = ['inputs', 'targets']", "field_names = ['inputs', 'inputs']"));
  expect_has(e, {"task.gin:8:", "field_names names column 'inputs' twice"});
  const std::string span = kGood + "t/seqio.Task.preprocessors = [@seqio.preprocessors.tokenize, "
                                   "@t5.data.preprocessors.span_corruption]\n";
  e = load_error(span + "t/t5.data.preprocessors.span_corruption.noise_density = nan\n");
  expect_has(e, {"task.gin:10:", "span_corruption.noise_density = nan is not in [0, 1]"});
  e = load_error(span + "t/t5.data.preprocessors.span_corruption.mean_noise_span_length = 1e999\n");
  expect_has(e, {"task.gin:10:", "mean_noise_span_length = inf must be a finite number > 0"});
  e = load_error(span + "t/t5.data.preprocessors.span_corruption.mean_noise_span_length = 0.0\n");
  expect_has(e, {"mean_noise_span_length = 0.0 must be a finite number > 0"});
}

TEST(TaskFile, MissingVocabularyFileIsNamed) {
  const auto e = load_error(with("vocab/spm1000.model", "vocab/nope.model"));
  expect_has(e, {"task.gin:1:", "SentencePiece model 'tests/golden/seqio/vocab/nope.model' cannot be opened", "relative paths start at the working directory"});
}

TEST(TaskFile, UnknownMetricNamesTheNearest) {
  const auto e = load_error(kGood + "t/seqio.Task.metric_fns = ['bleu', 'sequence_acuracy']\n");
  expect_has(e, {"task.gin:9:", "metric_fns: unknown metric 'sequence_acuracy'", "did you mean 'sequence_accuracy'"});
}

TEST(TaskFile, MixtureErrorsAreNamed) {
  auto e = load_error(kGood + "m/seqio.Mixture.tasks = [('t', 1.0), ('s', 1.0)]\n");
  expect_has(e, {"task.gin:9:", "mixture 'm': tasks: no Task or Mixture named 's'"});
  e = load_error(kGood + "m/seqio.Mixture.tasks = ['t']\n");
  expect_has(e, {"need a rate"});
}

// seqio.TsvDataSource.skip_header_lines = -1 read as 0 (bad-input sweep).
TEST(TaskFile, NegativeSkipHeaderLinesIsRefused) {
  auto e = load_error(kGood + "t/seqio.TsvDataSource.skip_header_lines = -1\n");
  expect_has(e, {"task.gin:9:", "task 't': source: seqio.TsvDataSource.skip_header_lines must be in [0, 2^31 - 1], got -1",
                 "hint: the number of header lines each file starts with (0: none)"});
  e = load_error(kGood + "t/seqio.Task.source = @seqio.TextLineDataSource()\n"
                         "t/seqio.TextLineDataSource.split_to_filepattern = {'train': 'examples/my_tsv/train.tsv'}\n"
                         "t/seqio.TextLineDataSource.skip_header_lines = -2\n");
  expect_has(e, {"task.gin:11:", "task 't': source: seqio.TextLineDataSource.skip_header_lines must be in [0, 2^31 - 1], got -2"});
  EXPECT_EQ(load_error(kGood + "t/seqio.TsvDataSource.skip_header_lines = 1\n"), "no error");
}

// A mixture may name a mixture declared further down the file: gin has no
// evaluation order a user controls (m1 naming m2 below it was "no Task or
// Mixture named 'm2'"). A cycle is named as one.
TEST(TaskFile, MixturesAreRegisteredAfterTheMixturesTheyName) {
  reset_registries();
  {
    TempDir dir("task_file");
    const auto names = t5x::task_file::load_task_file(dir.write(
        "task.gin", kGood + "m1/seqio.Mixture.tasks = [('m2', 1.0)]\n"
                            "m2/seqio.Mixture.tasks = [('m3', 1.0)]\n"
                            "m3/seqio.Mixture.tasks = [('t', 1.0)]\n"));
    EXPECT_EQ(names, (std::vector<std::string>{"t", "m3", "m2", "m1"}));
    auto m1 = seqio::MixtureRegistry::find("m1");
    ASSERT_NE(m1, nullptr);
    ASSERT_EQ(m1->tasks().size(), 1u);
    EXPECT_EQ(m1->tasks()[0]->name(), "t");
  }
  reset_registries();
  auto e = load_error(kGood + "m1/seqio.Mixture.tasks = [('m2', 1.0)]\n"
                              "m2/seqio.Mixture.tasks = [('t', 1.0), ('m3', 1.0)]\n"
                              "m3/seqio.Mixture.tasks = [('m1', 1.0)]\n");
  expect_has(e, {"task.gin:11:", "mixture 'm3': tasks: mixtures name each other in a cycle: m1 -> m2 -> m3 -> m1",
                 "hint: a mixture cannot contain itself"});
  e = load_error(kGood + "m/seqio.Mixture.tasks = [('t', 1.0), ('m', 1.0)]\n");
  expect_has(e, {"task.gin:9:", "mixture 'm': tasks: mixtures name each other in a cycle: m -> m"});
}

TEST(TaskFile, ANameRegisteredInCppIsADuplicate) {
  reset_registries();
  seqio::TaskRegistry::add(std::make_shared<seqio::Task>(
      "gpl3_lm", std::make_shared<seqio::InMemoryDataSource>(std::map<std::string, std::vector<seqio::Example>>{{"train", {}}}),
      seqio::OutputFeatures{}));
  TempDir dir("task_file");
  const std::string text = with("t/seqio.Task:", "t/seqio.Task:\n  name = 'gpl3_lm'");
  try {
    t5x::task_file::load_task_file(dir.write("task.gin", text));
    ADD_FAILURE() << "no error";
  } catch (const t5x::gin::GinError& e) {
    EXPECT_NE(std::string(e.what()).find("task.gin:3:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("task 'gpl3_lm' is already registered (in C++ or a --module)"),
              std::string::npos)
        << e.what();
  }
  reset_registries();
}

TEST(TaskFile, EnvironmentVariablesInPaths) {
  setenv("T5X_TASK_FILE_TEST_DIR", "examples/my_tsv", 1);
  EXPECT_EQ(load_error(with("examples/my_tsv/train.tsv", "${T5X_TASK_FILE_TEST_DIR}/train.tsv")), "no error");
  EXPECT_EQ(load_error(with("examples/my_tsv/train.tsv", "${T5X_TASK_FILE_UNSET:-examples/my_tsv}/train.tsv")),
            "no error");
  const auto e = load_error(with("examples/my_tsv/train.tsv", "${T5X_TASK_FILE_UNSET}/train.tsv"));
  expect_has(e, {"environment variable T5X_TASK_FILE_UNSET is not set"});
}

}  // namespace
