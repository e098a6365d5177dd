// A --module plugin for t5xcpp.seqio.load_module's test: registers
// python_plugin_upper (the demo lines, upper-cased). Built as a MODULE
// that links nothing: the registry symbols come from the loading program.
#include <algorithm>
#include <cctype>
#include <memory>

#include "seqio/registration.h"
#include "seqio/sources.h"
#include "seqio/task.h"

SEQIO_TASK_MODULE(python_plugin) {
  if (seqio::TaskRegistry::find("python_plugin_upper")) return;
  auto lines = std::make_shared<seqio::TextLineDataSource>(std::map<std::string, std::vector<std::string>>{
      {"validation", {seqio::data_root() + "/tests/data/seqio/gpl3_lines.validation.txt"}}});
  auto upper = seqio::Preprocessor::Map(
      "upper", [](seqio::Example ex, const seqio::PreprocessContext&) -> std::optional<seqio::Example> {
        auto& s = std::get<std::string>(ex["text"]);
        std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
        return ex;
      });
  seqio::TaskRegistry::add(std::make_shared<seqio::Task>("python_plugin_upper", lines, seqio::OutputFeatures{},
                                                         std::vector<seqio::Preprocessor>{upper}));
}
