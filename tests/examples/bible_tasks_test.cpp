// The main job's tasks (examples/bible/tasks.h) over a miniature data dir laid
// out like scripts/prepare_data.sh's output: real verses and glosses, and the
// committed 1000-piece SentencePiece model standing in for the Bible vocab.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bible/tasks.h"
#include "seqio/json_io.h"
#include "seqio/mixture.h"
#include "seqio/preprocessors/task_steps.h"
#include "seqio/task.h"

namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

class BibleTasks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bible_tasks_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    setenv("T5X_DATA_DIR", dir_.c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void prepare() {
    const std::string gen11 =
        R"({"book":"Genesis","kjv":"In the beginning God created the heaven and the earth.","ref":"Genesis 1:1",)"
        R"("rv":"EN el principio crió Dios los cielos y la tierra.","web":"In the beginning, God created the heavens and the earth."})";
    const std::string ruth11 =
        R"({"book":"Ruth","kjv":"Now it came to pass in the days when the judges ruled.","ref":"Ruth 1:1",)"
        R"("rv":"Y ACONTECIÓ en los días que gobernaban los jueces.","web":"In the days when the judges judged."})";
    write(dir_ / "bible/parallel.train.jsonl", gen11 + "\n");
    write(dir_ / "bible/parallel.validation.jsonl", gen11 + "\n");
    write(dir_ / "bible/parallel.test.jsonl", ruth11 + "\n");
    std::string mono;
    for (int i = 0; i < 40; ++i)
      mono += R"({"module":"engWEB2015eb","ref":"Genesis 1:)" + std::to_string(i + 1) +
              R"(","text":"In the beginning, God created the heavens and the earth. The earth was formless and empty."})" "\n";
    for (const char* s : {"train", "validation", "test"}) write(dir_ / ("bible/monolingual." + std::string(s) + ".jsonl"), mono);
    const std::string gloss = R"({"definition":"draw air into, and expel out of, the lungs","pos":"verb","word":"breathe"})" "\n";
    for (const char* s : {"train", "validation", "test"}) write(dir_ / ("wordnet/" + std::string(s) + ".jsonl"), gloss);
    fs::create_directories(dir_ / "vocab");
    fs::copy_file(fs::path(T5X_SOURCE_DIR) / "tests/golden/seqio/vocab/spm1000.model", dir_ / "vocab/bible_spm.model");
    write(dir_ / "COMPLETED", "test\n");
  }
  std::vector<seqio::Example> read(const std::string& task, const std::string& split,
                                   seqio::SequenceLengths lengths = {{"inputs", 64}, {"targets", 64}}) {
    seqio::DatasetOptions o;
    o.split = split;
    o.shuffle = false;
    o.seed = 1;
    o.sequence_lengths = lengths;
    auto ds = seqio::TaskRegistry::get(task)->get_dataset(o);
    return seqio::take_all(*ds);
  }
  fs::path dir_;
};

TEST_F(BibleTasks, MissingDataRegistersNothingAndSaysWhatToRun) {
  std::string why;
  if (seqio::TaskRegistry::find("bible_translate_en_es")) GTEST_SKIP() << "registered by an earlier test";
  EXPECT_FALSE(t5x::bible::register_bible_tasks(&why));
  EXPECT_NE(why.find("scripts/prepare_data.sh"), std::string::npos) << why;
  EXPECT_EQ(seqio::TaskRegistry::find("bible_translate_en_es"), nullptr);
}

TEST_F(BibleTasks, TranslationModernisationAndDefinitionFormats) {
  prepare();
  ASSERT_TRUE(t5x::bible::register_bible_tasks());
  auto en_es = read("bible_translate_en_es", "test");
  ASSERT_EQ(en_es.size(), 1u);
  EXPECT_EQ(seqio::get_text(en_es[0], "inputs_pretokenized"),
            "translate English to Spanish: In the days when the judges judged.");
  EXPECT_EQ(seqio::get_text(en_es[0], "targets_pretokenized"), "Y ACONTECIÓ en los días que gobernaban los jueces.");
  const auto& targets = seqio::get_tokens(en_es[0], "targets");
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(targets.back(), 1);  // EOS appended
  auto vocab = seqio::TaskRegistry::get("bible_translate_en_es")->output_features().at("targets").vocabulary;
  EXPECT_EQ(vocab->vocab_size(), 1100);  // 1000 pieces + 100 extra ids

  auto es_en = read("bible_translate_es_en", "train");
  EXPECT_EQ(seqio::get_text(es_en[0], "inputs_pretokenized"),
            "translate Spanish to English: EN el principio crió Dios los cielos y la tierra.");
  // The stand-in vocab was trained on English text, so round-trip English.
  EXPECT_EQ(vocab->decode(seqio::get_tokens(es_en[0], "targets")),
            "In the beginning, God created the heavens and the earth.");
  auto kjv = read("bible_kjv_to_web", "validation");
  EXPECT_EQ(seqio::get_text(kjv[0], "inputs_pretokenized"),
            "modernize: In the beginning God created the heaven and the earth.");
  EXPECT_EQ(seqio::get_text(kjv[0], "targets_pretokenized"), "In the beginning, God created the heavens and the earth.");
  auto wn = read("wordnet_define", "test");
  EXPECT_EQ(seqio::get_text(wn[0], "inputs_pretokenized"), "define: breathe (verb)");
  EXPECT_EQ(seqio::get_text(wn[0], "targets_pretokenized"), "draw air into, and expel out of, the lungs");

  auto mix = seqio::MixtureRegistry::get("bible_translation");
  EXPECT_EQ(mix->tasks().size(), 3u);
  EXPECT_DOUBLE_EQ(mix->get_rate(*seqio::TaskRegistry::get("bible_kjv_to_web")), 1.0);
}

TEST_F(BibleTasks, SpanCorruptionUsesSentinelsAndT5Lengths) {
  prepare();
  ASSERT_TRUE(t5x::bible::register_bible_tasks());
  auto ex = read("bible_span_corruption", "train", {{"inputs", 32}, {"targets", 32}});
  ASSERT_FALSE(ex.empty());
  const auto& inputs = seqio::get_tokens(ex[0], "inputs");
  const auto& targets = seqio::get_tokens(ex[0], "targets");
  EXPECT_EQ(inputs.size(), 32u);  // full chunks: inputs_length tokens incl. EOS
  EXPECT_EQ(inputs.back(), 1);
  EXPECT_EQ(targets.back(), 1);
  EXPECT_EQ(targets.front(), 1099);  // <extra_id_0> = vocab_size - 1 starts the targets
  int sentinels = 0;
  for (int32_t t : inputs) sentinels += t >= 1000;
  EXPECT_GE(sentinels, 1);
}

// The tasks examples/bible/tasks.gin declares, as tasks.cpp defined them in C++
// before they moved there (the oracle of the next test).
void register_cpp_reference(std::shared_ptr<const seqio::Task> kjv_to_web) {
  namespace task = seqio::preprocessors::task;
  using seqio::DType;
  const std::string dir = t5x::bible::data_dir();
  auto source = [&](const std::string& stem, std::map<std::string, DType> fields) {
    std::map<std::string, std::vector<std::string>> splits;
    for (const char* s : {"train", "validation", "test"}) splits[s] = {dir + "/bible/" + stem + s + ".jsonl"};
    return std::make_shared<seqio::JsonlDataSource>(std::move(splits), std::move(fields));
  };
  auto vocab = std::make_shared<seqio::SentencePieceVocabulary>(dir + "/vocab/bible_spm.model", 100);
  seqio::OutputFeatures features{{"inputs", seqio::Feature{vocab, true}}, {"targets", seqio::Feature{vocab, true}}};
  auto parallel = source("parallel.", {{"ref", DType::kString}, {"book", DType::kString}, {"web", DType::kString},
                                       {"kjv", DType::kString}, {"rv", DType::kString}});
  const std::vector<std::string> metrics{"bleu", "sequence_accuracy"};
  auto add = [](auto&&... args) { seqio::TaskRegistry::add(std::make_shared<seqio::Task>(args...)); };
  for (const auto& [name, from, to] : {std::tuple{"bible_translate_en_es", "en", "es"}, {"bible_translate_es_en", "es", "en"}})
    add(name, parallel, features,
        std::vector<seqio::Preprocessor>{task::rekey({{"en", "web"}, {"es", "rv"}}), task::translate(from, to),
                                         task::tokenize(), task::append_eos_after_trim()},
        nullptr, metrics);
  add("bible_span_corruption", source("monolingual.", {{"ref", DType::kString}, {"module", DType::kString}, {"text", DType::kString}}),
      features,
      std::vector<seqio::Preprocessor>{task::rekey({{"inputs", ""}, {"targets", "text"}}), task::tokenize(),
                                       seqio::Preprocessor::CachePlaceholder(), task::span_corruption(),
                                       task::append_eos_after_trim()},
      nullptr, std::vector<std::string>{});
  seqio::TaskRegistry::add(std::move(kjv_to_web));
  seqio::MixtureRegistry::add(std::make_shared<seqio::Mixture>(
      "bible_translation", std::vector<seqio::MixtureEntry>{{"bible_translate_en_es", 1.0}, {"bible_translate_es_en", 1.0},
                                                            {"bible_kjv_to_web", 1.0}}));
}

// Shuffled, two epochs, as JSON lines (a mixture by name).
std::vector<std::string> read_lines(const std::string& name, const std::string& split, seqio::SequenceLengths lengths) {
  seqio::DatasetOptions o;
  o.split = split;
  o.shuffle = true;
  o.seed = 3;
  o.num_epochs = 2;
  o.block_size = 7;
  o.sequence_lengths = lengths;
  std::vector<std::string> out;
  auto ds = seqio::get_dataset(name, o);
  for (seqio::Example ex; ds->next(ex);) out.push_back(seqio::example_to_json_line(ex));
  return out;
}

TEST_F(BibleTasks, DeclaredTasksEqualThePreviousCppDefinitions) {
  prepare();
  std::string parallel;  // more verses than prepare()'s one per split
  for (int i = 0; i < 30; ++i)
    parallel += R"({"book":"Genesis","kjv":"And God said, Let there be light )" + std::to_string(i) +
                R"(.","ref":"Genesis 1:)" + std::to_string(i + 1) + R"(","rv":"Y dijo Dios: Sea la luz )" +
                std::to_string(i) + R"(.","web":"God said, Let there be light )" + std::to_string(i) + R"(."})" "\n";
  write(dir_ / "bible/parallel.train.jsonl", parallel);
  seqio::TaskRegistry::reset();
  seqio::MixtureRegistry::reset();
  ASSERT_TRUE(t5x::bible::register_bible_tasks());
  const seqio::SequenceLengths lengths{{"inputs", 24}, {"targets", 16}};
  const std::vector<std::string> names{"bible_translate_en_es", "bible_translate_es_en", "bible_span_corruption",
                                       "bible_translation"};
  std::map<std::string, std::vector<std::string>> declared;
  for (const auto& n : names) declared[n] = read_lines(n, "train", lengths);
  const auto kjv = seqio::TaskRegistry::get("bible_kjv_to_web");

  seqio::TaskRegistry::reset();
  seqio::MixtureRegistry::reset();
  register_cpp_reference(kjv);
  for (const auto& n : names) {
    EXPECT_GE(declared[n].size(), 20u) << n;
    EXPECT_EQ(read_lines(n, "train", lengths), declared[n]) << n;
  }
  seqio::TaskRegistry::reset();
  seqio::MixtureRegistry::reset();
}

}  // namespace
