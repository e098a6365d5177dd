#include "bible/tasks.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>

#include "seqio/mixture.h"
#include "seqio/preprocessors/task_steps.h"
#include "seqio/registration.h"
#include "seqio/task.h"
#include "t5x/task_file/task_file.h"

namespace t5x::bible {
namespace {

namespace task = seqio::preprocessors::task;

std::shared_ptr<seqio::JsonlDataSource> jsonl_source(const std::string& dir, const std::string& stem,
                                                     std::map<std::string, seqio::DType> fields) {
  std::map<std::string, std::vector<std::string>> splits;
  for (const char* s : {"train", "validation", "test"}) splits[s] = {dir + "/" + stem + s + ".jsonl"};
  return std::make_shared<seqio::JsonlDataSource>(std::move(splits), std::move(fields));
}

// "modernize: <kjv>" -> web: a Map step in the style of seqio's translate.
seqio::Preprocessor prefix_inputs(std::string prefix) {
  return seqio::Preprocessor::Map("prefix_inputs", [prefix](seqio::Example ex, const seqio::PreprocessContext&)
                                                       -> std::optional<seqio::Example> {
    ex["inputs"] = prefix + seqio::get_text(ex, "inputs");
    return ex;
  });
}

// "define: WORD (POS)" -> definition.
seqio::Preprocessor wordnet_format() {
  return seqio::Preprocessor::Map("wordnet_format", [](seqio::Example ex, const seqio::PreprocessContext&)
                                                        -> std::optional<seqio::Example> {
    seqio::Example out;
    out["inputs"] = "define: " + seqio::get_text(ex, "word") + " (" + seqio::get_text(ex, "pos") + ")";
    out["targets"] = seqio::get_text(ex, "definition");
    return out;
  });
}

void register_all(const std::string& dir) {
  using seqio::DType;
  auto vocab = std::make_shared<seqio::SentencePieceVocabulary>(dir + "/vocab/bible_spm.model", 100);
  seqio::OutputFeatures features{{"inputs", seqio::Feature{vocab, true}}, {"targets", seqio::Feature{vocab, true}}};
  const std::map<std::string, DType> parallel_fields{
      {"ref", DType::kString}, {"book", DType::kString}, {"web", DType::kString},
      {"kjv", DType::kString}, {"rv", DType::kString}};
  auto parallel = jsonl_source(dir + "/bible", "parallel.", parallel_fields);
  const std::vector<std::string> translation_metrics{"bleu", "sequence_accuracy"};

  // The tasks that need a C++ step; tasks.gin declares the others.
  auto add = [](auto&&... args) { seqio::TaskRegistry::add(std::make_shared<seqio::Task>(args...)); };
  add("bible_kjv_to_web", parallel, features,
      std::vector<seqio::Preprocessor>{task::rekey({{"inputs", "kjv"}, {"targets", "web"}}),
                                       prefix_inputs("modernize: "), task::tokenize(),
                                       task::append_eos_after_trim()},
      nullptr, translation_metrics);
  auto wordnet = jsonl_source(dir + "/wordnet", "",
                              {{"word", DType::kString}, {"pos", DType::kString}, {"definition", DType::kString}});
  add("wordnet_define", wordnet, features,
      std::vector<seqio::Preprocessor>{wordnet_format(), task::tokenize(), task::append_eos_after_trim()}, nullptr,
      std::vector<std::string>{"rouge", "bleu"});
  // Reads $T5X_DATA_DIR itself (${T5X_DATA_DIR:-data}), as data_dir() does.
  t5x::task_file::load_task_file(task_file());
}

}  // namespace

std::string task_file() { return seqio::data_root() + "/examples/bible/tasks.gin"; }

std::string data_dir() {
  const char* env = std::getenv("T5X_DATA_DIR");
  return env && *env ? env : "data";
}

bool register_bible_tasks(std::string* why) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::string dir = data_dir();
  if (!std::filesystem::exists(dir + "/COMPLETED")) {
    if (why) *why = "the Bible/WordNet tasks need prepared data in '" + dir +
                    "' (run scripts/prepare_data.sh, or set T5X_DATA_DIR)";
    return false;
  }
  if (!seqio::TaskRegistry::find("bible_translate_en_es")) register_all(dir);
  return true;
}

}  // namespace t5x::bible

// Linked into the seqio and t5x programs: their load_task_modules() runs it.
SEQIO_TASK_MODULE(bible_tasks) { t5x::bible::register_bible_tasks(); }
