// A seqio task with a C++ preprocessor, as a --module plugin
// (examples/plugin/CMakeLists.txt builds it against the installed package).
//
// gpl3_reverse_words: each line of the GPL-3 text in tests/data/seqio becomes
//   inputs  = "reverse: " + the line
//   targets = the line's words in reverse order
// then tokenize and append_eos_after_trim (seqio's), with the 1000-piece
// SentencePiece vocabulary of the demo tasks (+100 extra ids). Data are found
// under seqio::data_root(): $SEQIO_DATA_ROOT, or the source tree the program
// was built from.
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "seqio/preprocessors/task_steps.h"
#include "seqio/registration.h"
#include "seqio/sources.h"
#include "seqio/task.h"
#include "seqio/vocabularies.h"

namespace {

// A per-example Map step (seqio's map_over_dataset); a line without words is
// dropped.
seqio::Preprocessor reverse_words() {
  return seqio::Preprocessor::Map(
      "reverse_words", [](seqio::Example ex, const seqio::PreprocessContext&) -> std::optional<seqio::Example> {
        const std::string line = seqio::get_text(ex, "text");
        std::istringstream in(line);
        std::vector<std::string> words;
        for (std::string w; in >> w;) words.push_back(w);
        if (words.empty()) return std::nullopt;
        std::string reversed;
        for (auto it = words.rbegin(); it != words.rend(); ++it) reversed += (reversed.empty() ? "" : " ") + *it;
        seqio::Example out;
        out["inputs"] = "reverse: " + line;
        out["targets"] = reversed;
        return out;
      });
}

}  // namespace

SEQIO_TASK_MODULE(reverse_words_plugin) {
  namespace task = seqio::preprocessors::task;
  const std::string root = seqio::data_root();
  auto vocab = seqio::make_vocabulary("sentencepiece:" + root + "/tests/golden/seqio/vocab/spm1000.model:extra_ids=100");
  auto lines = std::make_shared<seqio::TextLineDataSource>(std::map<std::string, std::vector<std::string>>{
      {"train", {root + "/tests/data/seqio/gpl3_lines.train-*.txt"}},
      {"validation", {root + "/tests/data/seqio/gpl3_lines.validation.txt"}}});
  seqio::OutputFeatures features{{"inputs", seqio::Feature{vocab, true}}, {"targets", seqio::Feature{vocab, true}}};
  seqio::TaskRegistry::add(std::make_shared<seqio::Task>(
      "gpl3_reverse_words", lines, features,
      std::vector<seqio::Preprocessor>{reverse_words(), task::tokenize(), task::append_eos_after_trim()}, nullptr,
      std::vector<std::string>{"sequence_accuracy"}));
}
