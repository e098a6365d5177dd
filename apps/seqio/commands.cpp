#include "commands.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "seqio/cache.h"
#include "seqio/errors.h"
#include "seqio/feature.h"
#include "seqio/json_io.h"
#include "seqio/mixture.h"
#include "seqio/vocabularies.h"
#ifdef SEQIO_HAVE_FEATURE_CONVERTERS
#include "seqio/feature_converters/feature_converters.h"
#endif
#ifdef SEQIO_HAVE_METRICS
#include "seqio/metrics/metrics.h"
#endif

namespace seqio::cli {

SequenceLengths parse_lengths(const std::string& s) {
  SequenceLengths out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    size_t used = 0;
    int v = -1;
    try {
      if (eq != std::string::npos) v = std::stoi(item.substr(eq + 1), &used);
    } catch (const std::exception&) {
    }
    if (eq == std::string::npos || eq == 0 || used != item.size() - eq - 1 || v < 0)
      throw std::invalid_argument("--lengths: '" + item + "' is not NAME=LENGTH (e.g. inputs=512,targets=114)");
    if (v > kMaxSequenceLength)
      throw std::invalid_argument("--lengths: '" + item + "' is longer than " + std::to_string(kMaxSequenceLength) +
                                  " tokens (the buffers would not fit in memory)");
    if (!out.emplace(item.substr(0, eq), v).second)
      throw std::invalid_argument("--lengths: '" + item.substr(0, eq) + "' is given twice");
  }
  return out;
}

int cmd_list(std::ostream& out) {
  for (const auto& name : TaskRegistry::names()) {
    auto t = TaskRegistry::get(name);
    out << "task     " << name << "  splits=";
    auto splits = t->splits();
    for (size_t i = 0; i < splits.size(); ++i) out << (i ? "," : "") << splits[i];
    out << "  features=";
    bool first = true;
    for (const auto& [k, f] : t->output_features()) {
      out << (first ? "" : ",") << k << ":" << dtype_name(f.dtype);
      first = false;
    }
    if (t->supports_caching()) out << "  cacheable";
    out << "\n";
  }
  for (const auto& name : MixtureRegistry::names()) {
    auto m = MixtureRegistry::get(name);
    out << "mixture  " << name << "  tasks=";
    bool first = true;
    for (const auto& t : m->tasks()) {
      out << (first ? "" : ",") << t->name() << ":" << m->get_rate(*t);
      first = false;
    }
    out << "\n";
  }
  return 0;
}

namespace {

// The identity of a `seqio show` stream, stored beside its position so that a
// position cannot resume another task, split, shard, seed or order.
nlohmann::json stream_identity(const ShowArgs& a) {
  const DatasetOptions& o = a.options;
  return {{"name", a.name},
          {"split", o.split},
          {"shard", std::to_string(o.shard.index) + "/" + std::to_string(o.shard.num_shards)},
          {"seed", o.seed ? nlohmann::json(*o.seed) : nlohmann::json(nullptr)},
          {"shuffle", o.shuffle}};
}

}  // namespace

int cmd_show(const ShowArgs& a, std::ostream& out) {
  DatasetOptions o = a.options;
  const nlohmann::json identity = stream_identity(a);
  if (!a.resume_from.empty()) {
    std::ifstream f(a.resume_from);
    if (!f) throw DataError(a.resume_from + ": cannot open position file");
    std::stringstream buf;
    buf << f.rdbuf();
    try {
      o.resume = position_from_json(buf.str(), a.resume_from);
    } catch (const DataError& e) {
      throw DataError(e.what() + std::string(" (hint: write the position again with --position-out)"));
    }
    nlohmann::json saved;
    try {
      saved = nlohmann::json::parse(buf.str());
    } catch (const nlohmann::json::exception&) {
    }
    for (const auto& [key, want] : identity.items()) {
      if (!saved.is_object() || !saved.contains(key)) continue;  // positions written before these fields
      if (saved[key] != want)
        throw DataError(a.resume_from + ": position of " + key + " " + saved[key].dump() + ", but this run has " +
                        key + " " + want.dump() + " (hint: resume with the options that wrote the position)");
    }
  }
  if (o.use_cached)
    for (const auto& t : tasks_without_cache_step(a.name))
      std::cerr << "seqio: warning: task '" << t << "' has no cache step; --use-cached reads it from its source, "
                << "as seqio does\n";
  // A length for a feature no task outputs trims nothing: a typo
  // (input=5 for inputs=5) left every example whole, silently.
  std::set<std::string> features;
  for (const auto& t : get_subtasks(a.name))
    for (const auto& [f, spec] : t->output_features()) features.insert(f);
  for (const auto& [name, len] : o.sequence_lengths)
    if (!features.count(name)) {
      std::string names;
      for (const auto& f : features) names += (names.empty() ? "'" : ", '") + f + "'";
      throw std::invalid_argument("--lengths: '" + name + "' is no output feature of '" + a.name +
                                  "' (its features: " + names + ")");
    }
  auto ds = get_dataset(a.name, o);
  Example ex;
  int64_t k = 0;
  while ((a.n < 0 || k < a.n) && ds->next(ex)) {
    out << example_to_json_line(ex) << "\n";
    ++k;
  }
  out.flush();
  if (k == 0 && a.n != 0)
    std::cerr << "seqio: warning: '" << a.name << "' split '" << o.split << "' gave no examples"
              << (o.resume || o.start ? " after the start position" : "")
              << " (hint: check its files, the shard, and filters)\n";
  if (!a.position_out.empty()) {
    nlohmann::json pos = nlohmann::json::parse(position_to_json(ds->position()));
    for (const auto& [key, v] : identity.items()) pos[key] = v;
    std::ofstream f(a.position_out);
    f << pos.dump() << "\n";
    if (!f) throw DataError(a.position_out + ": cannot write position file");
  }
  auto st = ds->stats();
  for (const auto& [feat, n] : st.trimmed_examples)
    std::cerr << "seqio: trimmed " << n << " example(s) of '" << feat << "' to its length ("
              << st.trimmed_tokens[feat] << " tokens removed)\n";
  if (st.examples_dropped) std::cerr << "seqio: " << st.examples_dropped << " example(s) dropped by filters\n";
  return 0;
}

int cmd_convert(const ConvertArgs& a, std::istream& in, std::ostream& out) {
#ifdef SEQIO_HAVE_FEATURE_CONVERTERS
  FeatureConverterOptions fo;
  fo.pack = a.pack;
  fo.bos_id = a.bos_id;
  auto conv = make_feature_converter(a.converter, fo, a.mask_id);
  const SequenceLengths lengths = parse_lengths(a.lengths);
  const int64_t chunk = conv->packing_window(lengths) * 64;  // whole windows: same output as one call
  std::vector<Example> batch;
  ConversionStats stats;
  int64_t batch_first_line = 1;  // the stdin line of batch[0]
  auto flush = [&] {
    if (batch.empty()) return;
    std::vector<Example> rows;
    try {
      rows = (*conv)(batch, lengths, &stats);
    } catch (const std::invalid_argument& e) {
      // The converter's own hint names library calls; here the fix is a flag.
      std::string m = e.what();
      if (m.find("not less than or equal to the expected length") == std::string::npos) throw;
      m = m.substr(0, m.find(" (trim it first"));
      throw DataError("stdin (examples from line " + std::to_string(batch_first_line) + "): " + m +
                      " (hint: raise that feature's --lengths value to the longest example)");
    }
    for (const auto& e : rows) out << example_to_json_line(e) << "\n";
    batch.clear();
  };
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) throw line_error("stdin", line_no, "empty line (hint: one JSON object per line)");
    try {
      if (batch.empty()) batch_first_line = line_no;
      batch.push_back(example_from_json(nlohmann::json::parse(line)));
    } catch (const std::exception& e) {
      throw line_error("stdin", line_no, e.what());
    }
    // Token ids are vocabulary indices: a negative one would pass through
    // into the model features (and index out of the embedding).
    for (const std::string& f : conv->task_features()) {
      auto it = batch.back().find(f);
      if (it == batch.back().end()) continue;
      if (const auto* t = std::get_if<Tokens>(&it->second))
        for (int32_t id : *t)
          if (id < 0)
            throw line_error("stdin", line_no, "field '" + f + "' holds id " + std::to_string(id) +
                                                   ", a negative token id (hint: ids index the vocabulary, from 0)");
    }
    if (static_cast<int64_t>(batch.size()) >= chunk) flush();
  }
  flush();
  std::cerr << "seqio: converted " << stats.input_examples << " example(s) into " << stats.output_examples
            << " row(s)\n";
  return 0;
#else
  (void)a, (void)in, (void)out;
  throw std::runtime_error("this seqio was built without seqio_feature_converters");
#endif
}

int cmd_vocab(const std::string& op, const std::string& spec, std::istream& in, std::ostream& out) {
  auto vocab = make_vocabulary(spec);
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (op == "encode") {
      if (auto bad = first_invalid_utf8(line))
        throw line_error("stdin", line_no, "invalid UTF-8 at column " + std::to_string(*bad + 1));
      auto ids = vocab->encode(line);
      for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
      out << "\n";
    } else {
      Tokens ids;
      try {
        auto first = line.find_first_not_of(" \t");
        if (first != std::string::npos && line[first] == '[') {
          for (int64_t v : nlohmann::json::parse(line).get<std::vector<int64_t>>()) {
            if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
              throw std::invalid_argument("id " + std::to_string(v) + " is outside the int32 range of ids");
            ids.push_back(int32_t(v));
          }
        } else {
          ids = PassThroughVocabulary(0).encode(line);
        }
      } catch (const std::exception& e) {
        throw line_error("stdin", line_no, std::string("expected ids as '3 4 5' or [3, 4, 5]: ") + e.what());
      }
      std::string text;
      try {
        text = vocab->decode(ids);
      } catch (const std::exception& e) {
        throw line_error("stdin", line_no, e.what());
      }
      out << text << "\n";
    }
  }
  return 0;
}

int cmd_cache(const CacheArgs& a, std::ostream& out) {
  // A cache belongs to one Task (seqio's cache_tasks_main takes tasks); a
  // Mixture reads its tasks' caches.
  if (!TaskRegistry::find(a.task))
    if (auto mix = MixtureRegistry::find(a.task)) {
      std::string names;
      for (const auto& t : mix->tasks())
        if (t->supports_caching()) names += (names.empty() ? "" : " ") + t->name();
      throw std::invalid_argument(
          "'" + a.task + "' is a Mixture; `seqio cache` writes one Task's cache\n  hint: " +
          (names.empty() ? std::string("none of its tasks has a cache step (seqio.CacheDatasetPlaceholder)")
                         : "cache each of its tasks with a cache step (" + names +
                               ") into the same --output; with USE_CACHED_TASKS=True a run reads the mixture's "
                               "cached tasks from there and the others from their sources"));
    }
  auto task = TaskRegistry::get(a.task);
  CacheWriteOptions o;
  o.splits = a.splits;
  o.seed = a.seed;
  o.num_threads = a.threads;
  o.overwrite = a.overwrite;
  auto res = write_cache(*task, a.output, o);
  nlohmann::json j = {{"dir", res.dir}, {"examples", res.examples}};
  out << j.dump() << "\n";
  return 0;
}

namespace {
// A file's lines without their ends: "\n" or "\r\n" (Python's text mode
// reads both alike, and the TSV source drops the "\r" too), so that a
// Windows file of targets scores as its text.
std::vector<std::string> read_lines(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw DataError(path + ": is a directory (hint: give the predictions or targets file in it)");
  std::ifstream f(path);
  if (!f) throw DataError(path + ": cannot open file");
  std::vector<std::string> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (auto bad = first_invalid_utf8(line))
      throw line_error(path, n, "invalid UTF-8 at column " + std::to_string(*bad + 1));
    out.push_back(line);
  }
  return out;
}
}  // namespace

#ifdef SEQIO_HAVE_METRICS
namespace {
bool looks_like_jsonl(const std::vector<std::string>& lines) {
  for (const auto& l : lines) {
    const size_t p = l.find_first_not_of(" \t\r");
    if (p != std::string::npos) return l[p] == '{';
  }
  return false;
}

// The value at a dotted path ("inputs.targets_pretokenized"), or null.
const nlohmann::json* at_path(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json* cur = &j;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// One string per JSONL line from `field`. With candidates, the first field
// present in line 1 is used for every line.
std::vector<std::string> jsonl_field(const std::string& path, const std::vector<std::string>& lines,
                                     std::vector<std::string> candidates, std::string* chosen,
                                     const char* text_metric = nullptr) {
  std::vector<std::string> out;
  std::string field;
  int64_t n = 0;
  for (const auto& l : lines) {
    ++n;
    if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    // Nesting is bounded: the value may be written back out (dump() recurses
    // per level), and 300000 levels overflowed the stack.
    constexpr int kMaxDepth = 256;
    try {
      j = nlohmann::json::parse(l, [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > kMaxDepth)
          throw line_error(path, n, "JSON nests deeper than " + std::to_string(kMaxDepth) + " levels");
        return true;
      });
    } catch (const nlohmann::json::exception& e) {
      throw line_error(path, n, std::string("not a JSON object: ") + e.what());
    }
    if (field.empty()) {
      for (const auto& c : candidates)
        if (at_path(j, c)) { field = c; break; }
      if (field.empty()) {
        std::string names;
        for (const auto& c : candidates) names += (names.empty() ? "" : ", ") + c;
        std::string keys;
        if (j.is_object())
          for (const auto& [k, v] : j.items()) keys += (keys.empty() ? "" : ", ") + k;
        throw line_error(path, n, "no field " + names + " (fields: " + keys +
                                      "; hint: name one with --prediction_field / --target_field)");
      }
    }
    const nlohmann::json* v = at_path(j, field);
    if (!v) throw line_error(path, n, "no field " + field + " (line 1 has it; every line needs it)");
    if (text_metric && !v->is_string())
      throw line_error(path, n, field + " is " + v->dump() + ", not a string; " + text_metric +
                                    " scores text (hint: a label or number metric such as accuracy takes it)");
    out.push_back(v->is_string() ? v->get<std::string>() : v->dump());
  }
  if (chosen) *chosen = field;
  return out;
}
}  // namespace
#endif

int cmd_metric(const MetricArgs& a, std::ostream& out) {
#ifdef SEQIO_HAVE_METRICS
  auto plines = read_lines(a.predictions_file);
  std::vector<std::string> p, t;
  if (looks_like_jsonl(plines)) {
    // t5x infer writes {"inputs": {..._pretokenized}, "prediction": ...};
    // the trainer's inference_eval files write {"input", "target", "prediction"}.
    p = jsonl_field(a.predictions_file, plines, {a.prediction_field.empty() ? "prediction" : a.prediction_field},
                    nullptr, seqio::metrics::scores_text(a.name) ? a.name.c_str() : nullptr);
    if (a.targets_file.empty()) {
      std::vector<std::string> c = {"target", "inputs.targets_pretokenized", "targets_pretokenized"};
      if (!a.target_field.empty()) c = {a.target_field};
      t = jsonl_field(a.predictions_file, plines, c, nullptr);
    }
  } else {
    p = std::move(plines);
    if (a.targets_file.empty())
      throw DataError(a.predictions_file + ": one prediction per line and no --targets (hint: pass --targets FILE, "
                      "or give JSONL predictions with a target field, as t5x infer writes them)");
  }
  if (p.empty())
    throw DataError(a.predictions_file + ": no predictions (an empty file; hint: score a t5x infer or "
                    "inference_eval output)");
  if (!a.targets_file.empty()) {
    auto tlines = read_lines(a.targets_file);
    if (looks_like_jsonl(tlines)) {
      std::vector<std::string> c = {"target", "inputs.targets_pretokenized", "targets_pretokenized", "targets"};
      if (!a.target_field.empty()) c = {a.target_field};
      t = jsonl_field(a.targets_file, tlines, c, nullptr);
    } else {
      t = std::move(tlines);
    }
  }
  if (!a.strip_prefix.empty())
    for (auto& s : p)
      if (s.rfind(a.strip_prefix, 0) == 0) s.erase(0, a.strip_prefix.size());
  if (t.size() != p.size())
    throw DataError((a.targets_file.empty() ? a.predictions_file : a.targets_file) + " has " +
                    std::to_string(t.size()) + " targets but " + a.predictions_file + " has " +
                    std::to_string(p.size()) + " predictions (hint: one example per line in both)");
  nlohmann::json j = seqio::metrics::compute(a.name, t, p);
  out << j.dump() << "\n";
  return 0;
#else
  (void)a, (void)out;
  throw std::runtime_error("this seqio was built without seqio_metrics");
#endif
}

}  // namespace seqio::cli
