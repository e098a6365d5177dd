#include "seqio/preprocessors/formatting.h"

#include <array>
#include <stdexcept>
#include <utility>

namespace seqio::preprocessors {
namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 25> kLanguages = {{
    {"ar", "Arabic"},   {"cs", "Czech"},    {"da", "Danish"},     {"de", "German"},
    {"en", "English"},  {"es", "Spanish"},  {"et", "Estonian"},   {"fi", "Finnish"},
    {"fr", "French"},   {"gu", "Gujarati"}, {"hi", "Hindi"},      {"it", "Italian"},
    {"ja", "Japanese"}, {"kk", "Kazakh"},   {"ko", "Korean"},     {"lt", "Lithuanian"},
    {"lv", "Latvian"},  {"nl", "Dutch"},    {"pl", "Polish"},     {"pt", "Portuguese"},
    {"ro", "Romanian"}, {"ru", "Russian"},  {"sv", "Swedish"},    {"tr", "Turkish"},
    {"zh", "Chinese"},
}};

}  // namespace

std::string language_english_name(std::string_view code) {
  const std::string_view two = code.substr(0, 2);
  for (const auto& [c, name] : kLanguages)
    if (c == two) return std::string(name);
  throw std::invalid_argument("[translate] unknown language code '" + std::string(code) +
                              "'; use translate_named with explicit language names");
}

Example translate_named(const Example& x, const std::string& source_key,
                        const std::string& target_key, std::string_view source_name,
                        std::string_view target_name) {
  Example out;
  out["inputs"] = "translate " + std::string(source_name) + " to " + std::string(target_name) +
                  ": " + get_text(x, source_key);
  out["targets"] = get_text(x, target_key);
  return out;
}

Example translate(const Example& x, std::string_view source_language,
                  std::string_view target_language) {
  return translate_named(x, std::string(source_language), std::string(target_language),
                         language_english_name(source_language),
                         language_english_name(target_language));
}

Example summarize(const Example& x, const std::string& article_key,
                  const std::string& summary_key) {
  Example out;
  out["inputs"] = "summarize: " + get_text(x, article_key);
  out["targets"] = get_text(x, summary_key);
  return out;
}

}  // namespace seqio::preprocessors
