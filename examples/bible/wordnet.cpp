#include "bible/wordnet.h"

#include <cstdint>
#include <sstream>
#include <stdexcept>

namespace t5x::bible {

bool parse_wordnet_data_line(const std::string& line, std::vector<Gloss>& out) {
  if (line.size() < 2 || line[0] == ' ') return false;
  size_t bar = line.find(" | ");
  if (bar == std::string::npos)
    throw std::runtime_error("wordnet: synset line without ' | ' gloss separator: " + line.substr(0, 40));
  std::istringstream in(line.substr(0, bar));
  std::string offset, lex_filenum, ss_type, w_cnt_hex;
  if (!(in >> offset >> lex_filenum >> ss_type >> w_cnt_hex))
    throw std::runtime_error("wordnet: truncated synset header: " + line.substr(0, 40));
  std::string pos;
  switch (ss_type[0]) {
    case 'n': pos = "noun"; break;
    case 'v': pos = "verb"; break;
    case 'a': case 's': pos = "adjective"; break;
    case 'r': pos = "adverb"; break;
    default: throw std::runtime_error("wordnet: unknown ss_type '" + ss_type + "' at " + offset);
  }
  int w_cnt = std::stoi(w_cnt_hex, nullptr, 16);
  std::string gloss = line.substr(bar + 3);
  while (!gloss.empty() && (gloss.back() == ' ' || gloss.back() == '\n' || gloss.back() == '\r')) gloss.pop_back();
  size_t ex = gloss.find("; \"");
  std::string def = ex == std::string::npos ? gloss : gloss.substr(0, ex);
  if (!def.empty() && def.back() == ';') def.pop_back();
  if (def.empty() || def[0] == '"') return true;  // gloss with examples only
  for (int i = 0; i < w_cnt; ++i) {
    std::string word, lex_id;
    if (!(in >> word >> lex_id)) throw std::runtime_error("wordnet: fewer words than w_cnt at " + offset);
    size_t paren = word.find('(');
    if (paren != std::string::npos) word = word.substr(0, paren);
    for (char& c : word) if (c == '_') c = ' ';
    out.push_back({word, pos, def});
  }
  return true;
}

std::string split_of_word(const std::string& word) {
  uint32_t h = 2166136261u;
  for (unsigned char c : word) { h ^= c; h *= 16777619u; }
  uint32_t b = h % 100;
  if (b < 90) return "train";
  if (b < 95) return "validation";
  return "test";
}

}  // namespace t5x::bible
