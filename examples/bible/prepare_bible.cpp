// t5x_prepare_bible: builds the main job's corpora from diatheke exports and
// WordNet (docs/data.md). Invoked by scripts/prepare_data.sh.
//
//   t5x_prepare_bible --web WEB.txt --kjv KJV.txt --rv RV.txt --wordnet DIR --out DIR
//
// Writes OUT/bible/parallel.<split>.jsonl     {ref, book, web, kjv, rv}
//        OUT/bible/monolingual.<split>.jsonl  {ref, module, text}
//        OUT/wordnet/<split>.jsonl            {word, pos, definition}
//        OUT/spm_input.txt                     training-split text for spm_train
//        OUT/stats.json                        counts, including what was dropped and why
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bible/corpus_clean.h"
#include "bible/wordnet.h"

using nlohmann::json;
using namespace t5x::bible;

namespace {

std::map<std::string, Verse> read_export(const std::string& path, const std::string& module,
                                         std::vector<std::string>& order, json& stats) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open (run scripts/prepare_data.sh, which exports it with diatheke)");
  std::map<std::string, Verse> verses;
  std::string line;
  int lineno = 0, unparsed = 0, empty = 0;
  while (std::getline(in, line)) {
    ++lineno;
    auto v = parse_export_line(line);
    if (!v) {
      if (line != "(" + module + ")" && !line.empty()) ++unparsed;
      continue;
    }
    if (v->text.empty()) ++empty;
    std::string ref = v->ref();
    if (!verses.count(ref)) order.push_back(ref);
    verses[ref] = *v;
  }
  if (verses.empty()) throw std::runtime_error(path + ": no verse found; is it a diatheke export of " + module + "?");
  stats[module] = {{"lines", lineno}, {"verses", verses.size()}, {"empty_verses", empty}, {"unparsed_lines", unparsed}};
  return verses;
}

std::string arg(int argc, char** argv, const std::string& name) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  throw std::runtime_error("missing " + name + " (usage: t5x_prepare_bible --web F --kjv F --rv F --wordnet DIR --out DIR)");
}

}  // namespace

int main(int argc, char** argv) try {
  std::string out = arg(argc, argv, "--out");
  json stats;
  std::vector<std::string> web_order, kjv_order, rv_order;
  auto web = read_export(arg(argc, argv, "--web"), "engWEB2015eb", web_order, stats);
  auto kjv = read_export(arg(argc, argv, "--kjv"), "engKJV2006eb", kjv_order, stats);
  auto rv = read_export(arg(argc, argv, "--rv"), "spaRV1909eb", rv_order, stats);

  std::map<std::string, std::ofstream> files;
  auto file = [&](const std::string& rel) -> std::ofstream& {
    auto it = files.find(rel);
    if (it == files.end()) {
      it = files.emplace(rel, std::ofstream(out + "/" + rel)).first;
      if (!it->second) throw std::runtime_error(out + "/" + rel + ": cannot write");
    }
    return it->second;
  };
  std::ofstream& spm = file("spm_input.txt");

  // Parallel verses: the KJV versification (canon of 66 books) drives the
  // order; a verse is kept when all three texts have it non-empty.
  std::map<std::string, int> parallel_counts, dropped;
  for (const std::string& ref : kjv_order) {
    const Verse& k = kjv.at(ref);
    auto w = web.find(ref);
    auto r = rv.find(ref);
    if (w == web.end() || r == rv.end()) { ++dropped["missing_in_web_or_rv"]; continue; }
    if (k.text.empty() || w->second.text.empty() || r->second.text.empty()) { ++dropped["empty_in_some_text"]; continue; }
    std::string split = split_of_book(k.book);
    json j = {{"ref", ref}, {"book", k.book}, {"web", w->second.text}, {"kjv", k.text}, {"rv", r->second.text}};
    file("bible/parallel." + split + ".jsonl") << j.dump() << "\n";
    ++parallel_counts[split];
  }
  // Monolingual verses for span corruption: every non-empty verse of each
  // text; books outside the 66 (WEB's deuterocanon) go to train.
  std::map<std::string, int> mono_counts;
  std::set<std::string> canon;
  for (const auto& [ref, v] : kjv) canon.insert(v.book);
  auto emit_mono = [&](const std::map<std::string, Verse>& vs, const std::vector<std::string>& order,
                       const std::string& module) {
    for (const std::string& ref : order) {
      const Verse& v = vs.at(ref);
      if (v.text.empty()) continue;
      std::string split = canon.count(v.book) ? split_of_book(v.book) : "train";
      file("bible/monolingual." + split + ".jsonl") << json{{"ref", ref}, {"module", module}, {"text", v.text}}.dump() << "\n";
      ++mono_counts[split];
      if (split == "train") spm << v.text << "\n";
    }
  };
  emit_mono(web, web_order, "engWEB2015eb");
  emit_mono(kjv, kjv_order, "engKJV2006eb");
  emit_mono(rv, rv_order, "spaRV1909eb");

  // WordNet glosses.
  std::string wn = arg(argc, argv, "--wordnet");
  std::map<std::string, int> wn_counts;
  for (const char* pos : {"noun", "verb", "adj", "adv"}) {
    std::string path = wn + "/data." + pos;
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot open (install the Debian package wordnet-base)");
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      std::vector<Gloss> gl;
      try {
        parse_wordnet_data_line(line, gl);
      } catch (const std::exception& e) {
        throw std::runtime_error(path + ":" + std::to_string(lineno) + ": " + e.what());
      }
      for (const Gloss& g : gl) {
        std::string split = split_of_word(g.word);
        file("wordnet/" + split + ".jsonl") << json{{"word", g.word}, {"pos", g.pos}, {"definition", g.definition}}.dump() << "\n";
        ++wn_counts[split];
        if (split == "train") spm << g.word << ": " << g.definition << "\n";
      }
    }
  }
  stats["parallel"] = parallel_counts;
  stats["parallel_dropped"] = dropped;
  stats["monolingual"] = mono_counts;
  stats["wordnet"] = wn_counts;
  file("stats.json") << stats.dump(2) << "\n";
  for (auto& [name, f] : files) {
    f.close();
    if (!f) throw std::runtime_error(out + "/" + name + ": write failed (disk full?)");
  }
  std::cout << stats.dump() << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "t5x_prepare_bible: error: " << e.what() << "\n";
  return 1;
}
