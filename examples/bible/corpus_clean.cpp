#include "bible/corpus_clean.h"

#include <cctype>
#include <set>

namespace t5x::bible {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Parses "C:V: " at s[p]; on success sets chapter/verse and the end offset.
bool parse_cv(const std::string& s, size_t p, int& ch, int& vs, size_t& end) {
  size_t q = p;
  if (q >= s.size() || !is_digit(s[q])) return false;
  ch = 0;
  while (q < s.size() && is_digit(s[q])) ch = ch * 10 + (s[q++] - '0');
  if (q >= s.size() || s[q] != ':') return false;
  ++q;
  if (q >= s.size() || !is_digit(s[q])) return false;
  vs = 0;
  while (q < s.size() && is_digit(s[q])) vs = vs * 10 + (s[q++] - '0');
  if (q + 1 > s.size() || s[q] != ':') return false;
  ++q;
  if (q < s.size() && s[q] == ' ') ++q;
  end = q;
  return true;
}

// Removes an element and its content: <name ...>...</name>; self-closing and
// milestone forms (<name .../>) are removed alone.
void remove_element(std::string& s, const std::string& name) {
  const std::string open = "<" + name, close = "</" + name + ">";
  size_t p = 0;
  while ((p = s.find(open, p)) != std::string::npos) {
    size_t after = p + open.size();
    if (after < s.size() && s[after] != ' ' && s[after] != '>' && s[after] != '/') { p = after; continue; }
    size_t gt = s.find('>', p);
    if (gt == std::string::npos) { s.erase(p); return; }
    if (s[gt - 1] == '/') { s.erase(p, gt + 1 - p); continue; }
    size_t c = s.find(close, gt);
    size_t stop = c == std::string::npos ? gt + 1 : c + close.size();
    s.erase(p, stop - p);
  }
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  size_t p = 0;
  while ((p = s.find(from, p)) != std::string::npos) {
    s.replace(p, from.size(), to);
    p += to.size();
  }
}

// "</a><b" -> "</a> <b": a closing tag glued to an opening one separates two
// words in these modules ("God</w><w ...>created"); a closing tag followed
// by another closing tag ("LORD</w></divineName>'s") does not.
void insert_space_between_elements(std::string& s) {
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  bool last_tag_closing = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '<' && i > 0 && s[i - 1] == '>' && last_tag_closing && i + 1 < s.size() &&
        std::isalpha((unsigned char)s[i + 1]))
      out += ' ';
    if (c == '<') last_tag_closing = i + 1 < s.size() && s[i + 1] == '/';
    out += c;
  }
  s.swap(out);
}

}  // namespace

std::optional<Verse> parse_export_line(const std::string& line) {
  // The book name starts at the line start or right after a '>' and runs to
  // the space before "C:V: ". Take the first such marker outside any tag.
  size_t start = 0;
  while (start <= line.size()) {
    size_t seg_end = line.find('<', start);
    if (seg_end == std::string::npos) seg_end = line.size();
    // Scan this text segment for " C:V: ".
    for (size_t p = start; p < seg_end; ++p) {
      if (line[p] != ' ' || p == start) continue;
      int ch, vs;
      size_t end;
      if (!parse_cv(line, p + 1, ch, vs, end)) continue;
      std::string book = line.substr(start, p - start);
      size_t b = book.find_first_not_of(' ');
      if (b == std::string::npos) continue;
      book = book.substr(b);
      if (book.empty() || !(std::isupper((unsigned char)book[0]))) continue;
      Verse v;
      v.book = book;
      v.chapter = ch;
      v.verse = vs;
      v.text = clean_verse_markup(line.substr(end));
      return v;
    }
    if (seg_end >= line.size()) break;
    size_t gt = line.find('>', seg_end);
    if (gt == std::string::npos) break;
    start = gt + 1;
  }
  return std::nullopt;
}

// R8: the closing milestone of a book, <div ... eID="..." ... type="book"/>.
// Anything after it in the same verse is back matter (WEB: a glossary).
size_t book_end(const std::string& s) {
  for (size_t p = s.find("<div "); p != std::string::npos; p = s.find("<div ", p + 1)) {
    const size_t gt = s.find('>', p);
    if (gt == std::string::npos) break;
    const std::string tag = s.substr(p, gt - p + 1);
    if (tag.find(" eID=") != std::string::npos && tag.find("type=\"book\"") != std::string::npos) return p;
  }
  return std::string::npos;
}

std::string clean_verse_markup(const std::string& body) {
  std::string s = body.substr(0, book_end(body));                                  // R8
  for (const char* name : {"title", "note", "milestone"}) remove_element(s, name);  // R2
  insert_space_between_elements(s);                                                // R3
  std::string out;                                                                 // R4
  out.reserve(s.size());
  bool in_tag = false;
  for (char c : s) {
    if (c == '<') in_tag = true;
    else if (c == '>') in_tag = false;
    else if (!in_tag) out += c;
  }
  replace_all(out, "\xC2\xB6", " ");                                               // R5
  replace_all(out, "&lt;", "<");                                                   // R6
  replace_all(out, "&gt;", ">");
  replace_all(out, "&quot;", "\"");
  replace_all(out, "&apos;", "'");
  replace_all(out, "&amp;", "&");
  std::string ws;                                                                  // R7
  ws.reserve(out.size());
  for (char c : out) {
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (space) {
      if (!ws.empty() && ws.back() != ' ') ws += ' ';
    } else {
      if ((c == ',' || c == ';' || c == ':' || c == '.' || c == '!' || c == '?') && !ws.empty() &&
          ws.back() == ' ')
        ws.pop_back();
      ws += c;
    }
  }
  while (!ws.empty() && ws.back() == ' ') ws.pop_back();
  return ws;
}

std::string split_of_book(const std::string& book) {
  // Whole books, so that no chapter is shared between splits. Small books
  // keep evaluation fast on 2 cores (see docs/data.md for verse counts).
  static const std::set<std::string> test = {"Ruth", "Jonah", "Titus", "Philemon", "Jude"};
  static const std::set<std::string> validation = {"Obadiah", "Nahum", "Habakkuk", "II John", "III John"};
  if (test.count(book)) return "test";
  if (validation.count(book)) return "validation";
  return "train";
}

}  // namespace t5x::bible
