// Demo tasks over the GPL-3 text committed in tests/data/seqio (see
// registration.h). Their preprocessors are minimal local versions so that
// seqio_core stands alone; seqio_preprocessors holds the full set.
#include <memory>
#include <mutex>
#include <sstream>

#include "seqio/mixture.h"
#include "seqio/registration.h"

namespace seqio {

namespace {

Preprocessor rekey_text(std::string to) {
  return Preprocessor::Map("rekey", [to](Example ex, const PreprocessContext&) -> std::optional<Example> {
    Example out;
    out[to] = get_text(ex, "text");
    return out;
  });
}

// inputs = first half of the words, targets = the rest.
Preprocessor split_halves() {
  return Preprocessor::Map("split_halves", [](Example ex, const PreprocessContext&) -> std::optional<Example> {
    std::istringstream in(get_text(ex, "text"));
    std::vector<std::string> w;
    for (std::string s; in >> s;) w.push_back(s);
    if (w.size() < 2) return std::nullopt;
    std::string a, b;
    for (size_t i = 0; i < w.size(); ++i) (i < w.size() / 2 ? a : b) += (i == 0 || i == w.size() / 2 ? "" : " ") + w[i];
    Example out;
    out["inputs"] = a;
    out["targets"] = b;
    return out;
  });
}

// Text output features -> ids, keeping "<key>_pretokenized" (seqio tokenize).
Preprocessor tokenize() {
  return Preprocessor::Map("tokenize", [](Example ex, const PreprocessContext& ctx) -> std::optional<Example> {
    for (const auto& [k, f] : ctx.output_features) {
      auto it = ex.find(k);
      if (it == ex.end() || !std::holds_alternative<std::string>(it->second)) continue;
      std::string text = std::get<std::string>(it->second);
      it->second = f.vocabulary->encode(text);
      ex[k + "_pretokenized"] = std::move(text);
    }
    return ex;
  });
}

// seqio append_eos_after_trim.
Preprocessor append_eos_after_trim() {
  return Preprocessor::Map("append_eos_after_trim", [](Example ex, const PreprocessContext& ctx) -> std::optional<Example> {
    for (const auto& [k, f] : ctx.output_features) {
      if (!f.add_eos || !f.vocabulary || !f.vocabulary->eos_id()) continue;
      auto it = ex.find(k);
      if (it == ex.end()) continue;
      auto& t = std::get<Tokens>(it->second);
      auto len = ctx.sequence_lengths.find(k);
      if (len != ctx.sequence_lengths.end() && static_cast<int>(t.size()) > len->second - 1)
        t.resize(std::max(0, len->second - 1));
      t.push_back(*f.vocabulary->eos_id());
    }
    return ex;
  });
}

void register_all() {
  const std::string root = data_root() + "/tests/data/seqio/";
  auto vocab = make_vocabulary("sentencepiece:" + data_root() + "/tests/golden/seqio/vocab/spm1000.model:extra_ids=100");
  auto paragraphs = std::make_shared<JsonlDataSource>(
      std::map<std::string, std::vector<std::string>>{{"train", {root + "gpl3_paragraphs.train.jsonl"}},
                                                      {"validation", {root + "gpl3_paragraphs.validation.jsonl"}}},
      std::map<std::string, DType>{{"id", DType::kInt64}, {"text", DType::kString}});
  auto lines = std::make_shared<TextLineDataSource>(std::map<std::string, std::vector<std::string>>{
      {"train", {root + "gpl3_lines.train-*.txt"}}, {"validation", {root + "gpl3_lines.validation.txt"}}});
  OutputFeatures lm{{"targets", Feature{vocab, true}}};
  OutputFeatures enc_dec{{"inputs", Feature{vocab, true}}, {"targets", Feature{vocab, true}}};

  if (!TaskRegistry::find("gpl3_lm"))
    TaskRegistry::add(std::make_shared<Task>("gpl3_lm", paragraphs, lm,
                                             std::vector<Preprocessor>{rekey_text("targets"), tokenize(),
                                                                       append_eos_after_trim()},
                                             nullptr, std::vector<std::string>{"sequence_accuracy"}));
  if (!TaskRegistry::find("gpl3_prefix"))
    TaskRegistry::add(std::make_shared<Task>(
        "gpl3_prefix", paragraphs, enc_dec,
        std::vector<Preprocessor>{split_halves(), tokenize(), Preprocessor::CachePlaceholder(), append_eos_after_trim()},
        nullptr, std::vector<std::string>{"bleu", "sequence_accuracy"}));
  if (!TaskRegistry::find("gpl3_lines_copy"))
    TaskRegistry::add(std::make_shared<Task>(
        "gpl3_lines_copy", lines, enc_dec,
        std::vector<Preprocessor>{Preprocessor::Map("copy_line",
                                                    [](Example ex, const PreprocessContext&) -> std::optional<Example> {
                                                      Example out;
                                                      out["inputs"] = get_text(ex, "text");
                                                      out["targets"] = get_text(ex, "text");
                                                      return out;
                                                    }),
                                  tokenize(), append_eos_after_trim()},
        nullptr, std::vector<std::string>{"sequence_accuracy"}));
  if (!MixtureRegistry::find("gpl3_mix"))
    MixtureRegistry::add(std::make_shared<Mixture>(
        "gpl3_mix", std::vector<MixtureEntry>{{"gpl3_prefix", 2.0}, {"gpl3_lines_copy", 1.0}}));
}

}  // namespace

void register_builtin_tasks() {
  static std::once_flag once;
  std::call_once(once, register_all);
}

}  // namespace seqio
