#include "seqio/metrics/porter.h"

#include <functional>
#include <string>
#include <vector>

namespace seqio::metrics {
namespace {

bool is_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

// A 'y' is a consonant at the start or after a vowel, a vowel after a consonant.
std::vector<bool> consonant_flags(std::string_view w) {
  std::vector<bool> f(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (is_vowel(w[i])) f[i] = false;
    else if (w[i] == 'y') f[i] = (i == 0) ? true : !f[i - 1];
    else f[i] = true;
  }
  return f;
}

bool is_consonant(std::string_view w, std::size_t i) { return consonant_flags(w)[i]; }

// m in [C](VC)^m[V]: the number of vowel->consonant transitions.
int measure(std::string_view stem) {
  auto f = consonant_flags(stem);
  int m = 0;
  for (std::size_t i = 1; i < f.size(); ++i)
    if (!f[i - 1] && f[i]) ++m;
  return m;
}

bool contains_vowel(std::string_view stem) {
  for (bool c : consonant_flags(stem))
    if (!c) return true;
  return false;
}

bool ends_double_consonant(std::string_view w) {
  return w.size() >= 2 && w[w.size() - 1] == w[w.size() - 2] && is_consonant(w, w.size() - 1);
}

// *o: consonant-vowel-consonant, last not w/x/y; NLTK also takes a 2-letter
// vowel-consonant word.
bool ends_cvc(std::string_view w) {
  const std::size_t n = w.size();
  if (n >= 3) {
    auto f = consonant_flags(w);
    if (f[n - 3] && !f[n - 2] && f[n - 1] && w[n - 1] != 'w' && w[n - 1] != 'x' &&
        w[n - 1] != 'y')
      return true;
  }
  return n == 2 && !is_consonant(w, 0) && is_consonant(w, 1);
}

bool ends_with(std::string_view w, std::string_view s) {
  return w.size() >= s.size() && w.substr(w.size() - s.size()) == s;
}

using Cond = std::function<bool(std::string_view)>;
struct Rule {
  std::string_view suffix;  // "*d" = any double consonant
  std::string replacement;
  Cond cond;                // empty = always
};

// nltk's _apply_rule_list: the first rule whose suffix matches decides, even
// when its condition fails (then the word is returned unchanged).
std::string apply_rules(const std::string& w, const std::vector<Rule>& rules) {
  for (const auto& r : rules) {
    if (r.suffix == "*d" && ends_double_consonant(w)) {
      std::string stem = w.substr(0, w.size() - 2);
      return (!r.cond || r.cond(stem)) ? stem + r.replacement : w;
    }
    if (ends_with(w, r.suffix)) {
      std::string stem = w.substr(0, w.size() - r.suffix.size());
      return (!r.cond || r.cond(stem)) ? stem + r.replacement : w;
    }
  }
  return w;
}

bool positive(std::string_view s) { return measure(s) > 0; }
bool gt1(std::string_view s) { return measure(s) > 1; }

std::string step1a(const std::string& w) {
  if (ends_with(w, "ies") && w.size() == 4) return w.substr(0, 1) + "ie";
  return apply_rules(w, {{"sses", "ss", {}}, {"ies", "i", {}}, {"ss", "ss", {}}, {"s", "", {}}});
}

std::string step1b(const std::string& w) {
  if (ends_with(w, "ied")) return w.substr(0, w.size() - 3) + (w.size() == 4 ? "ie" : "i");
  if (ends_with(w, "eed")) {
    std::string stem = w.substr(0, w.size() - 3);
    return measure(stem) > 0 ? stem + "ee" : w;
  }
  std::string mid;
  bool ok = false;
  for (std::string_view suf : {std::string_view("ed"), std::string_view("ing")}) {
    if (ends_with(w, suf)) {
      mid = w.substr(0, w.size() - suf.size());
      if (contains_vowel(mid)) { ok = true; break; }
    }
  }
  if (!ok) return w;
  // mid is non-empty: it contains a vowel.
  const char last = mid.back();
  return apply_rules(mid, {
      {"at", "ate", {}},
      {"bl", "ble", {}},
      {"iz", "ize", {}},
      {"*d", std::string(1, last),
       [last](std::string_view) { return last != 'l' && last != 's' && last != 'z'; }},
      {"", "e", [](std::string_view s) { return measure(s) == 1 && ends_cvc(s); }},
  });
}

std::string step1c(const std::string& w) {
  return apply_rules(w, {{"y", "i", [](std::string_view s) {
                            return s.size() > 1 && is_consonant(s, s.size() - 1);
                          }}});
}

std::string step2(const std::string& w) {
  if (ends_with(w, "alli") && positive(std::string_view(w).substr(0, w.size() - 4)))
    return step2(w.substr(0, w.size() - 4) + "al");
  const std::string_view whole = w;
  return apply_rules(w, {
      {"ational", "ate", positive}, {"tional", "tion", positive},
      {"enci", "ence", positive},   {"anci", "ance", positive},
      {"izer", "ize", positive},    {"bli", "ble", positive},
      {"alli", "al", positive},     {"entli", "ent", positive},
      {"eli", "e", positive},       {"ousli", "ous", positive},
      {"ization", "ize", positive}, {"ation", "ate", positive},
      {"ator", "ate", positive},    {"alism", "al", positive},
      {"iveness", "ive", positive}, {"fulness", "ful", positive},
      {"ousness", "ous", positive}, {"aliti", "al", positive},
      {"iviti", "ive", positive},   {"biliti", "ble", positive},
      {"fulli", "ful", positive},
      // NLTK measures the word without "ogi" (keeping the "l").
      {"logi", "log", [whole](std::string_view) {
         return positive(whole.substr(0, whole.size() - 3));
       }},
  });
}

std::string step3(const std::string& w) {
  return apply_rules(w, {{"icate", "ic", positive}, {"ative", "", positive},
                         {"alize", "al", positive}, {"iciti", "ic", positive},
                         {"ical", "ic", positive},  {"ful", "", positive},
                         {"ness", "", positive}});
}

std::string step4(const std::string& w) {
  return apply_rules(w, {
      {"al", "", gt1},   {"ance", "", gt1}, {"ence", "", gt1}, {"er", "", gt1},
      {"ic", "", gt1},   {"able", "", gt1}, {"ible", "", gt1}, {"ant", "", gt1},
      {"ement", "", gt1}, {"ment", "", gt1}, {"ent", "", gt1},
      {"ion", "", [](std::string_view s) {
         return measure(s) > 1 && (s.back() == 's' || s.back() == 't');
       }},
      {"ou", "", gt1},   {"ism", "", gt1},  {"ate", "", gt1},  {"iti", "", gt1},
      {"ous", "", gt1},  {"ive", "", gt1},  {"ize", "", gt1},
  });
}

std::string step5a(const std::string& w) {
  if (!ends_with(w, "e")) return w;
  std::string stem = w.substr(0, w.size() - 1);
  const int m = measure(stem);
  if (m > 1 || (m == 1 && !ends_cvc(stem))) return stem;
  return w;
}

std::string step5b(const std::string& w) {
  const std::string_view whole = w;
  return apply_rules(w, {{"ll", "l", [whole](std::string_view) {
                            return measure(whole.substr(0, whole.size() - 1)) > 1;
                          }}});
}

const char* irregular(std::string_view w) {
  static const std::pair<const char*, const char*> kPool[] = {
      {"sky", "sky"},         {"skies", "sky"},       {"dying", "die"},
      {"lying", "lie"},       {"tying", "tie"},       {"news", "news"},
      {"innings", "inning"},  {"inning", "inning"},   {"outings", "outing"},
      {"outing", "outing"},   {"cannings", "canning"}, {"canning", "canning"},
      {"howe", "howe"},       {"proceed", "proceed"}, {"exceed", "exceed"},
      {"succeed", "succeed"},
  };
  for (const auto& [from, to] : kPool)
    if (w == from) return to;
  return nullptr;
}

}  // namespace

std::string porter_stem(std::string_view word) {
  std::string w(word);
  for (char& c : w)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  if (const char* irr = irregular(w)) return irr;
  if (word.size() <= 2) return w;
  w = step1a(w);
  w = step1b(w);
  w = step1c(w);
  w = step2(w);
  w = step3(w);
  w = step4(w);
  w = step5a(w);
  w = step5b(w);
  return w;
}

}  // namespace seqio::metrics
