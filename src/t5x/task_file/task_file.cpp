#include "t5x/task_file/task_file.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>

#include "seqio/metrics/metrics.h"
#include "seqio/mixture.h"
#include "seqio/preprocessors/task_steps.h"
#include "seqio/registration.h"
#include "seqio/vocabularies.h"

namespace t5x::task_file {
namespace {

using gin::Config;
using gin::GinError;
using gin::SourceLocation;
using gin::Value;
namespace pt = seqio::preprocessors::task;

// Where a task's parameter is read: the configurable as seen from a scope.
struct Node {
  const Config& cfg;
  std::string scope;         // task scope joined with the reference's scope
  std::string configurable;  // canonical name
  std::string field;         // "task 'x': preprocessors[1]" for messages
  SourceLocation decl;       // the task's or mixture's first binding

  const gin::Binding* binding(const std::string& p) const { return cfg.find(scope, configurable, p); }
  SourceLocation where(const std::string& p) const {
    const auto* b = binding(p);
    return b ? b->where : SourceLocation{};
  }
  Value get(const std::string& p) const { return cfg.get(scope, configurable, p); }
  std::string str(const std::string& p) const { return cfg.get_string(scope, configurable, p); }
  int64_t integer(const std::string& p) const { return cfg.get_int(scope, configurable, p); }
  double real(const std::string& p) const { return cfg.get_double(scope, configurable, p); }
  bool boolean(const std::string& p) const { return cfg.get_bool(scope, configurable, p); }
  bool none(const std::string& p) const { return cfg.is_none(scope, configurable, p); }
  std::vector<std::string> strings(const std::string& p) const {
    std::vector<std::string> out;
    for (const auto& v : cfg.get_list(scope, configurable, p)) out.push_back(v.as_string());
    return out;
  }
  // A dict of strings; a None value reads as '' (seqio's rekey maps a falsy
  // old key, e.g. C4's {'inputs': None, 'targets': 'text'}, to an empty feature).
  std::map<std::string, std::string> string_map(const std::string& p) const {
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : cfg.get_dict(scope, configurable, p))
      out[k.as_string()] = v.kind() == gin::ValueKind::kNone ? std::string() : v.as_string();
    return out;
  }
  [[noreturn]] void fail(const SourceLocation& at, const std::string& what, const std::string& hint = {}) const {
    throw GinError(at.known() ? at : decl, field + ": " + what, hint);
  }
};

std::string hint_names(const std::string& word, const std::vector<std::string>& names, const std::string& kind) {
  auto near = gin::nearest_names(word, names);
  std::string h = near.empty() ? "" : "did you mean '" + near[0] + "'? ";
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  return h + kind + ": " + all;
}

using gin::expand_env;

// ---- sources ---------------------------------------------------------------

using SplitPatterns = std::map<std::string, std::vector<std::string>>;

// What a path that is neither a regular file nor a directory is, for messages.
std::string file_kind(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  switch (fs::status(path, ec).type()) {
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    default: return "not a file or directory";
  }
}

SplitPatterns read_splits(const Node& n) {
  SplitPatterns out;
  for (const auto& [k, v] : n.cfg.get_dict(n.scope, n.configurable, "split_to_filepattern")) {
    const std::string split = k.as_string();
    std::vector<Value> pats = v.is_sequence() ? v.as_list() : std::vector<Value>{v};
    if (pats.empty())
      n.fail(v.where(), "split_to_filepattern['" + split + "'] has no file pattern", "give one path or glob");
    for (const auto& p : pats) {
      const std::string pat = expand_env(p.as_string(), p.where());
      std::optional<std::string> not_file;  // a match that is a directory or other non-file
      try {
        for (const auto& f : seqio::list_files({pat})) {  // a plain path is kept as is
          std::error_code ec;
          if (std::filesystem::exists(f, ec) && !std::filesystem::is_regular_file(f, ec)) not_file = f;
          else if (!std::filesystem::is_regular_file(f, ec)) throw std::runtime_error(f);
          if (not_file) break;
        }
      } catch (const std::exception&) {
        n.fail(p.where(), "split '" + split + "': no file matches '" + pat + "'",
               "paths are relative to the working directory (" + std::filesystem::current_path().string() +
                   "); check the path or run from the directory the task file expects");
      }
      if (not_file && std::filesystem::is_directory(*not_file))
        n.fail(p.where(), "split '" + split + "': '" + *not_file + "' is a directory, not a file",
               "name the files inside it, e.g. '" + (std::filesystem::path(*not_file) / "*.tsv").string() + "'");
      if (not_file)  // a device or FIFO reads without end, or blocks
        n.fail(p.where(), "split '" + split + "': '" + *not_file + "' is not a regular file (" +
                              file_kind(*not_file) + ")",
               "name the data files (regular files) of the split");
      out[split].push_back(pat);
    }
  }
  if (out.empty())
    n.fail(n.where("split_to_filepattern"), "split_to_filepattern names no split",
           "e.g. {'train': 'train.tsv', 'validation': 'validation.tsv'}");
  return out;
}

std::map<std::string, seqio::DType> read_dtypes(const Node& n, const std::string& param) {
  std::map<std::string, seqio::DType> out;
  for (const auto& [k, v] : n.cfg.get_dict(n.scope, n.configurable, param)) {
    try {
      out[k.as_string()] = seqio::dtype_from_name(v.as_string());
    } catch (const std::invalid_argument&) {
      n.fail(v.where(), param + "['" + k.as_string() + "']: unknown dtype '" + v.as_string() + "'",
             hint_names(v.as_string(), {"float64", "int32", "int64", "string"}, "dtypes"));
    }
  }
  return out;
}

// Read as 0 (or wrapped to int), a negative or huge count hid a typo.
int header_lines(const Node& n) {
  const int64_t k = n.integer("skip_header_lines");
  if (k < 0 || k > std::numeric_limits<int>::max())
    n.fail(n.where("skip_header_lines"),
           n.configurable + ".skip_header_lines must be in [0, 2^31 - 1], got " + std::to_string(k),
           "the number of header lines each file starts with (0: none)");
  return int(k);
}

using SourceFn = std::function<std::shared_ptr<const seqio::DataSource>(const Node&)>;

const std::map<std::string, SourceFn>& sources() {
  static const std::map<std::string, SourceFn> m{
      {"seqio.TextLineDataSource",
       [](const Node& n) {
         std::optional<int64_t> count;
         if (!n.none("num_input_examples")) count = n.integer("num_input_examples");
         return std::make_shared<seqio::TextLineDataSource>(read_splits(n), header_lines(n), count);
       }},
      {"seqio.TsvDataSource",
       [](const Node& n) {
         auto fields = n.strings("field_names");
         if (fields.empty()) n.fail(n.where("field_names"), "field_names is empty", "name each column, e.g. ['en', 'es']");
         // A name twice: the later column took it (['en', 'en'] read Spanish as English).
         for (size_t i = 0; i < fields.size(); ++i)
           if (std::find(fields.begin(), fields.begin() + long(i), fields[i]) != fields.begin() + long(i))
             n.fail(n.where("field_names"), "field_names names column '" + fields[i] + "' twice",
                    "give each column its own name, e.g. ['en', 'es']");
         return std::make_shared<seqio::TsvDataSource>(read_splits(n), fields, header_lines(n));
       }},
      {"seqio.JsonlDataSource",
       [](const Node& n) { return std::make_shared<seqio::JsonlDataSource>(read_splits(n), read_dtypes(n, "fields")); }},
      {"seqio.TFExampleDataSource",
       [](const Node& n) {
         return std::make_shared<seqio::TFExampleDataSource>(read_splits(n), read_dtypes(n, "feature_description"));
       }},
  };
  return m;
}

// ---- preprocessors ---------------------------------------------------------

using StepFn = std::function<seqio::Preprocessor(const Node&)>;

// A noise density in [0, 1] and a mean span length > 0, named at their
// binding when the file is read (a nan density passed the pipeline's check
// and failed at the first example without naming it).
double noise_density(const Node& n) {
  const double d = n.real("noise_density");
  if (!(d >= 0 && d <= 1))
    throw GinError(n.where("noise_density"), n.field + ": " + n.configurable + ".noise_density = " +
                                                 Value::real(d).to_gin() + " is not in [0, 1]",
                   "the fraction of tokens to mask; T5's span corruption uses 0.15");
  return d;
}

seqio::preprocessors::SpanCorruptionOptions span_options(const Node& n) {
  seqio::preprocessors::SpanCorruptionOptions o;
  o.mean_noise_span_length = n.real("mean_noise_span_length");
  if (!(o.mean_noise_span_length > 0 && std::isfinite(o.mean_noise_span_length)))
    throw GinError(n.where("mean_noise_span_length"),
                   n.field + ": " + n.configurable + ".mean_noise_span_length = " +
                       Value::real(o.mean_noise_span_length).to_gin() + " must be a finite number > 0",
                   "T5's span corruption uses 3.0");
  o.noise_density = noise_density(n);
  o.input_feature_key = n.str("input_feature_key");
  o.merge_examples_to_reduce_padding = n.boolean("merge_examples_to_reduce_padding");
  o.reserved_for_packing = n.integer("reserved_for_packing");
  o.passthrough_feature_keys = n.strings("passthrough_feature_keys");
  return o;
}

const std::map<std::string, StepFn>& steps() {
  static const std::map<std::string, StepFn> m{
      {"seqio.preprocessors.rekey", [](const Node& n) { return pt::rekey(n.string_map("key_map")); }},
      {"seqio.preprocessors.tokenize",
       [](const Node& n) { return pt::tokenize(n.boolean("copy_pretokenized"), n.boolean("with_eos")); }},
      {"seqio.preprocessors.tokenize_and_append_eos",
       [](const Node& n) { return pt::tokenize_and_append_eos(n.boolean("copy_pretokenized")); }},
      {"seqio.preprocessors.append_eos", [](const Node&) { return pt::append_eos(); }},
      {"seqio.preprocessors.append_eos_after_trim", [](const Node&) { return pt::append_eos_after_trim(); }},
      {"seqio.CacheDatasetPlaceholder",
       [](const Node& n) { return seqio::Preprocessor::CachePlaceholder(n.boolean("required")); }},
      {"t5.data.preprocessors.translate",
       [](const Node& n) { return pt::translate(n.str("source_language"), n.str("target_language")); }},
      {"t5.data.preprocessors.summarize",
       [](const Node& n) { return pt::summarize(n.str("article_key"), n.str("summary_key")); }},
      {"t5.data.preprocessors.truncate_inputs_left", [](const Node&) { return pt::truncate_inputs_left(); }},
      {"t5.data.preprocessors.select_random_chunk",
       [](const Node& n) {
         seqio::preprocessors::SelectRandomChunkOptions o;
         o.feature_key = n.str("feature_key");
         o.max_length = n.integer("max_length");
         if (!n.none("min_length")) o.min_length = n.integer("min_length");
         o.uniform_random_start = n.boolean("uniform_random_start");
         o.passthrough_feature_keys = n.strings("passthrough_feature_keys");
         return pt::select_random_chunk(o);
       }},
      {"t5.data.preprocessors.reduce_concat_tokens",
       [](const Node& n) { return pt::reduce_concat_tokens(n.str("feature_key"), n.integer("batch_size")); }},
      {"t5.data.preprocessors.split_tokens",
       [](const Node& n) {
         seqio::preprocessors::SplitTokensOptions o;
         o.feature_key = n.str("feature_key");
         if (!n.none("min_tokens_per_segment")) o.min_tokens_per_segment = n.integer("min_tokens_per_segment");
         o.passthrough_feature_keys = n.strings("passthrough_feature_keys");
         return pt::split_tokens(n.integer("max_tokens_per_segment"), o);
       }},
      {"t5.data.preprocessors.split_tokens_to_inputs_length",
       [](const Node&) { return pt::split_tokens_to_inputs_length(); }},
      {"t5.data.preprocessors.split_tokens_to_targets_length",
       [](const Node&) { return pt::split_tokens_to_targets_length(); }},
      {"t5.data.preprocessors.span_corruption", [](const Node& n) { return pt::span_corruption(span_options(n)); }},
      {"t5.data.preprocessors.iid_denoising", [](const Node&) { return pt::iid_denoising(); }},
      {"t5.data.preprocessors.prefix_lm", [](const Node& n) { return pt::prefix_lm(noise_density(n)); }},
  };
  return m;
}

// t5.data.postprocessors.lower_text lowers ASCII letters only (Python's
// str.lower also lowers other scripts).
const std::map<std::string, seqio::PostprocessFn>& postprocessors() {
  static const std::map<std::string, seqio::PostprocessFn> m{
      {"t5.data.postprocessors.lower_text",
       [](const std::string& s, const seqio::Example&, bool) {
         std::string out = s;
         for (char& c : out)
           if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
         return out;
       }},
  };
  return m;
}

template <class M>
std::vector<std::string> keys(const M& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

std::string canonical(const Config& cfg, const gin::Reference& ref) {
  const auto* spec = cfg.registry() ? cfg.registry()->by_name(ref.name) : nullptr;
  return spec ? spec->name : ref.name;
}

// The configurable a value references, as a Node, or a named error.
Node referenced(const Node& parent, const Value& v, const std::string& field, const std::string& kind,
                const std::vector<std::string>& allowed) {
  if (v.kind() != gin::ValueKind::kReference)
    parent.fail(v.where(), field + ": expected a " + kind + " reference (@name), got " + v.describe(),
                hint_names("", allowed, kind + "s"));
  const auto& ref = v.as_reference();
  Node n{parent.cfg, gin::reference_scope(parent.scope, ref.scope), canonical(parent.cfg, ref), parent.field + ": " + field,
         v.where()};
  if (std::find(allowed.begin(), allowed.end(), n.configurable) == allowed.end())
    parent.fail(v.where(), field + ": '" + ref.name + "' is not a " + kind, hint_names(ref.name, allowed, kind + "s"));
  return n;
}

// ---- vocabularies and features ---------------------------------------------

std::shared_ptr<const seqio::Vocabulary> vocabulary_from_spec(const std::string& spec, const Node& n,
                                                              const SourceLocation& at) {
  try {
    return seqio::make_vocabulary(spec);
  } catch (const std::exception& e) {
    n.fail(at, std::string("vocabulary: ") + e.what(),
           "a vocabulary is 'sentencepiece:PATH[:extra_ids=N]', 'byte[:extra_ids=N]', 'passthrough:SIZE' or "
           "@seqio.SentencePieceVocabulary(); relative paths start at the working directory (" +
               std::filesystem::current_path().string() + ")");
  }
}

std::shared_ptr<const seqio::Vocabulary> read_vocabulary(const Node& n, const Value& v) {
  if (v.kind() == gin::ValueKind::kString) return vocabulary_from_spec(expand_env(v.as_string(), v.where()), n, v.where());
  Node vn = referenced(n, v, "vocabulary", "vocabulary",
                       {"seqio.ByteVocabulary", "seqio.PassThroughVocabulary", "seqio.SentencePieceVocabulary"});
  std::string spec;
  if (vn.configurable == "seqio.SentencePieceVocabulary") {
    const std::string path = expand_env(vn.str("sentencepiece_model_file"), vn.where("sentencepiece_model_file"));
    if (!vn.boolean("reverse_extra_ids")) vn.fail(vn.where("reverse_extra_ids"), "reverse_extra_ids=False is not supported");
    spec = "sentencepiece:" + path + ":extra_ids=" + std::to_string(vn.integer("extra_ids"));
    return vocabulary_from_spec(spec, vn, vn.where("sentencepiece_model_file"));
  }
  if (vn.configurable == "seqio.ByteVocabulary") spec = "byte:extra_ids=" + std::to_string(vn.integer("extra_ids"));
  else {
    spec = "passthrough:" + std::to_string(vn.integer("size"));
    if (!vn.none("eos_id")) spec += ":eos_id=" + std::to_string(vn.integer("eos_id"));
  }
  return vocabulary_from_spec(spec, vn, v.where());
}

seqio::OutputFeatures read_features(const Node& task) {
  seqio::OutputFeatures out;
  for (const auto& [k, v] : task.cfg.get_dict(task.scope, task.configurable, "output_features")) {
    const std::string name = k.as_string();
    if (v.kind() == gin::ValueKind::kString) {  // a vocabulary spec: seqio.Feature's defaults
      out[name] = seqio::Feature{read_vocabulary(task, v)};
      continue;
    }
    Node f = referenced(task, v, "output_features['" + name + "']", "feature", {"seqio.Feature"});
    seqio::Feature feat;
    try {
      feat.dtype = seqio::dtype_from_name(f.str("dtype"));
    } catch (const std::invalid_argument&) {
      f.fail(f.where("dtype"), "unknown dtype '" + f.str("dtype") + "'",
             hint_names(f.str("dtype"), {"float64", "int32", "int64", "string"}, "dtypes"));
    }
    feat.add_eos = f.boolean("add_eos");
    feat.required = f.boolean("required");
    feat.rank = int(f.integer("rank"));
    if (!f.none("vocabulary")) feat.vocabulary = read_vocabulary(f, f.get("vocabulary"));
    else if (feat.dtype == seqio::DType::kInt32)
      f.fail(f.where("vocabulary"), "feature '" + name + "' needs a vocabulary",
             "bind " + f.scope + "/seqio.Feature.vocabulary = 'sentencepiece:PATH:extra_ids=100' (or unscoped)");
    out[name] = feat;
  }
  if (out.empty())
    task.fail(task.where("output_features"), "output_features is empty",
              "e.g. {'inputs': @seqio.Feature(), 'targets': @seqio.Feature()}");
  return out;
}

std::vector<std::string> read_metrics(const Node& task) {
  std::vector<std::string> out;
  const auto known = seqio::metrics::metric_names();
  static const std::regex nclass("mean_[0-9]+class_f1");
  for (const auto& v : task.cfg.get_list(task.scope, task.configurable, "metric_fns")) {
    std::string name;
    if (v.kind() == gin::ValueKind::kReference) {
      name = canonical(task.cfg, v.as_reference());
      name = name.substr(name.rfind('.') + 1);
      // t5.evaluation.metrics.bleu tokenizes with sacrebleu's `intl` (T5's
      // default); this port's 'bleu' is sacrebleu's own default, 13a.
      if (name == "bleu") name = "bleu_intl";
    } else {
      name = v.as_string();
    }
    if (std::find(known.begin(), known.end(), name) == known.end() && !std::regex_match(name, nclass))
      task.fail(v.where(), "metric_fns: unknown metric '" + name + "'", hint_names(name, known, "metrics"));
    out.push_back(name);
  }
  return out;
}

// ---- tasks and mixtures ----------------------------------------------------

// name -> the declaration that registered it and what it registered (a
// registry reset or a C++ registration since then makes it stale).
struct Declared {
  std::string at;
  const void* registered = nullptr;
};
std::map<std::string, Declared>& declared_at() {
  static std::map<std::string, Declared> m;
  return m;
}
// file:line with the file made absolute, so that two spellings of one path agree.
std::string declaration_key(const SourceLocation& at) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(at.file, ec);
  return (ec ? at.file : p.string()) + ":" + std::to_string(at.line);
}
std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

// Scopes of `configurable`'s bindings in first-bound order, with the first
// binding's location.
std::vector<std::pair<std::string, SourceLocation>> declarations(const Config& cfg, const std::string& configurable) {
  std::vector<std::pair<std::string, SourceLocation>> out;
  std::set<std::string> seen;
  for (const auto& b : cfg.bindings())
    if (b.configurable == configurable && !b.scope.empty() && seen.insert(b.scope).second) out.push_back({b.scope, b.where});
  return out;
}

// True when `name` is registered from `at` already (the file was read
// before); throws when another declaration, C++ or a --module registered it.
bool already(const std::string& name, const SourceLocation& at, const void* registered, const std::string& kind) {
  if (!registered) return false;
  auto it = declared_at().find(name);
  const bool ours = it != declared_at().end() && it->second.registered == registered;
  if (ours && it->second.at == declaration_key(at)) return true;
  throw GinError(at, kind + " '" + name + "' is already registered" +
                         (ours ? " (declared at " + it->second.at + ")" : " (in C++ or a --module)"),
                 "give this " + kind + " another name");
}

std::shared_ptr<seqio::Task> build_task(const Config& cfg, const std::string& scope, const std::string& name,
                                        const SourceLocation& at) {
  Node task{cfg, scope, "seqio.Task", "task '" + name + "'", at};
  if (!task.binding("source")) task.fail({}, "has no source", "bind " + scope + "/seqio.Task.source = @seqio.TsvDataSource() (or another source)");
  Node src = referenced(task, task.get("source"), "source", "source", keys(sources()));
  auto source = sources().at(src.configurable)(src);
  auto features = read_features(task);
  std::vector<seqio::Preprocessor> steps_out;
  const auto pre = cfg.get_list(scope, "seqio.Task", "preprocessors");
  for (size_t i = 0; i < pre.size(); ++i) {
    Node s = referenced(task, pre[i], "preprocessors[" + std::to_string(i) + "]", "preprocessor", keys(steps()));
    steps_out.push_back(steps().at(s.configurable)(s));
  }
  seqio::PostprocessFn post;
  if (!task.none("postprocess_fn"))
    post = postprocessors().at(
        referenced(task, task.get("postprocess_fn"), "postprocess_fn", "postprocessor", keys(postprocessors())).configurable);
  try {
    return std::make_shared<seqio::Task>(name, source, features, steps_out, post, read_metrics(task));
  } catch (const std::invalid_argument& e) {
    task.fail({}, e.what());
  }
}

std::shared_ptr<seqio::Mixture> build_mixture(const Config& cfg, const std::string& scope, const std::string& name,
                                              const SourceLocation& at) {
  Node mix{cfg, scope, "seqio.Mixture", "mixture '" + name + "'", at};
  std::vector<seqio::MixtureEntry> entries;
  for (const auto& v : cfg.get_list(scope, "seqio.Mixture", "tasks")) {
    if (v.kind() == gin::ValueKind::kString) { entries.push_back({v.as_string(), std::nullopt}); continue; }
    const auto& pair = v.as_list();
    if (pair.size() != 2)
      mix.fail(v.where(), "tasks: each entry is 'name' or ('name', rate), got " + v.describe());
    seqio::MixtureEntry e{pair[0].as_string(), std::nullopt};
    if (pair[1].kind() == gin::ValueKind::kReference) {
      Node r = referenced(mix, pair[1], "tasks['" + e.name + "'] rate", "rate function", {"seqio.mixing_rate_num_examples"});
      std::optional<double> maximum;
      if (!r.none("maximum")) maximum = r.real("maximum");
      e.rate = seqio::mixing_rate_num_examples(maximum, r.real("scale"), r.real("temperature"), r.str("split"));
    } else {
      e.rate = pair[1].as_double();
    }
    entries.push_back(std::move(e));
  }
  std::optional<double> default_rate;
  if (!mix.none("default_rate")) default_rate = mix.real("default_rate");
  for (const auto& e : entries)
    if (!seqio::TaskRegistry::find(e.name) && !seqio::MixtureRegistry::find(e.name)) {
      std::vector<std::string> names = seqio::TaskRegistry::names(), more = seqio::MixtureRegistry::names();
      names.insert(names.end(), more.begin(), more.end());
      mix.fail(mix.where("tasks"), "tasks: no Task or Mixture named '" + e.name + "'",
               hint_names(e.name, names, "registered tasks and mixtures"));
    }
  try {
    return std::make_shared<seqio::Mixture>(name, std::move(entries), default_rate);
  } catch (const std::invalid_argument& e) {
    mix.fail(mix.where("tasks"), e.what());
  }
}

// The names a mixture's tasks list gives, for ordering; malformed entries are
// left to build_mixture to report.
std::vector<std::string> member_names(const Config& cfg, const std::string& scope) {
  std::vector<std::string> out;
  try {
    for (const auto& v : cfg.get_list(scope, "seqio.Mixture", "tasks")) {
      if (v.kind() == gin::ValueKind::kString) out.push_back(v.as_string());
      else if (v.is_sequence() && !v.as_list().empty() && v.as_list()[0].kind() == gin::ValueKind::kString)
        out.push_back(v.as_list()[0].as_string());
    }
  } catch (const std::exception&) {
  }
  return out;
}

std::string declared_name(const Config& cfg, const std::string& scope, const std::string& configurable) {
  return cfg.is_none(scope, configurable, "name") ? scope : cfg.get_string(scope, configurable, "name");
}

}  // namespace

void register_configurables(gin::Registry& r) {
  if (r.contains("seqio.Task")) return;
  r.add("seqio.Task",
        {{"name", "None"}, {"source", ""}, {"output_features", ""}, {"preprocessors", "[]"},
         {"postprocess_fn", "None"}, {"metric_fns", "[]"}},
        "a seqio Task declared in gin; the scope names it (seqio.TaskRegistry.add)");
  r.add("seqio.Mixture", {{"name", "None"}, {"tasks", ""}, {"default_rate", "None"}},
        "a seqio Mixture declared in gin; tasks = ['a', ('b', 2.0), ...]");
  r.add("seqio.mixing_rate_num_examples",
        {{"maximum", "None"}, {"scale", "1.0"}, {"temperature", "1.0"}, {"split", "'train'"}});
  r.add("seqio.Feature",
        {{"vocabulary", "None"}, {"add_eos", "True"}, {"required", "True"}, {"dtype", "'int32'"}, {"rank", "1"}});
  if (!r.contains("seqio.PassThroughVocabulary")) r.add("seqio.PassThroughVocabulary", {{"size", ""}, {"eos_id", "None"}});
  const std::pair<std::string, std::string> splits{"split_to_filepattern", ""};
  r.add("seqio.TextLineDataSource", {splits, {"skip_header_lines", "0"}, {"num_input_examples", "None"}});
  r.add("seqio.TsvDataSource", {splits, {"field_names", ""}, {"skip_header_lines", "0"}});
  r.add("seqio.JsonlDataSource", {splits, {"fields", "{}"}});
  r.add("seqio.TFExampleDataSource", {splits, {"feature_description", "{}"}});

  r.add("seqio.preprocessors.rekey", {{"key_map", ""}});
  r.add("seqio.preprocessors.tokenize", {{"copy_pretokenized", "True"}, {"with_eos", "False"}});
  r.add("seqio.preprocessors.tokenize_and_append_eos", {{"copy_pretokenized", "True"}});
  r.add("seqio.preprocessors.append_eos", {});
  r.add("seqio.preprocessors.append_eos_after_trim", {});
  r.add("seqio.CacheDatasetPlaceholder", {{"required", "False"}});
  r.add("t5.data.preprocessors.translate", {{"source_language", ""}, {"target_language", ""}});
  r.add("t5.data.preprocessors.summarize", {{"article_key", ""}, {"summary_key", ""}});
  r.add("t5.data.preprocessors.truncate_inputs_left", {});
  r.add("t5.data.preprocessors.select_random_chunk",
        {{"feature_key", "'targets'"}, {"max_length", "65536"}, {"min_length", "None"},
         {"uniform_random_start", "False"}, {"passthrough_feature_keys", "[]"}});
  r.add("t5.data.preprocessors.reduce_concat_tokens", {{"feature_key", "'targets'"}, {"batch_size", "128"}});
  r.add("t5.data.preprocessors.split_tokens",
        {{"max_tokens_per_segment", ""}, {"feature_key", "'targets'"}, {"min_tokens_per_segment", "None"},
         {"passthrough_feature_keys", "[]"}});
  r.add("t5.data.preprocessors.split_tokens_to_inputs_length", {});
  r.add("t5.data.preprocessors.split_tokens_to_targets_length", {});
  r.add("t5.data.preprocessors.span_corruption",
        {{"mean_noise_span_length", "3.0"}, {"noise_density", "0.15"}, {"input_feature_key", "'inputs'"},
         {"merge_examples_to_reduce_padding", "True"}, {"reserved_for_packing", "0"},
         {"passthrough_feature_keys", "[]"}});
  r.add("t5.data.preprocessors.iid_denoising", {});
  r.add("t5.data.preprocessors.prefix_lm", {{"noise_density", "0.5"}});
  for (const auto& [name, fn] : postprocessors()) r.add(name, {});
  for (const auto& m : seqio::metrics::metric_names()) r.add("t5.evaluation.metrics." + m, {});
}

std::vector<std::string> preprocessor_names() { return keys(steps()); }

std::vector<std::string> register_declared(const Config& cfg) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> out;
  for (const auto& [scope, at] : declarations(cfg, "seqio.Task")) {
    const std::string name = declared_name(cfg, scope, "seqio.Task");
    if (already(name, at, seqio::TaskRegistry::find(name).get(), "task")) continue;
    declared_at()[name] = {declaration_key(at), seqio::TaskRegistry::add(build_task(cfg, scope, name, at)).get()};
    out.push_back(name);
  }
  // Mixtures in dependency order: a mixture is built (its members looked up)
  // after the mixtures of this file it names, as a gin file has no order of
  // evaluation a user controls.
  struct Decl {
    std::string scope, name;
    SourceLocation at;
  };
  std::vector<Decl> mixtures;
  std::map<std::string, size_t> index;
  for (const auto& [scope, at] : declarations(cfg, "seqio.Mixture")) {
    const std::string name = declared_name(cfg, scope, "seqio.Mixture");
    index.emplace(name, mixtures.size());
    mixtures.push_back({scope, name, at});
  }
  std::vector<int> state(mixtures.size(), 0);  // 0: not seen, 1: on `path`, 2: registered
  std::vector<std::string> path;
  std::function<void(size_t)> visit = [&](size_t i) {
    const Decl& m = mixtures[i];
    if (state[i] == 2) return;
    state[i] = 1;
    path.push_back(m.name);
    for (const auto& member : member_names(cfg, m.scope)) {
      auto j = index.find(member);
      if (j == index.end()) continue;
      if (state[j->second] == 1) {  // named at the entry that closes the cycle
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), member); it != path.end(); ++it) cycle += *it + " -> ";
        Node mix{cfg, m.scope, "seqio.Mixture", "mixture '" + m.name + "'", m.at};
        mix.fail(mix.where("tasks"), "tasks: mixtures name each other in a cycle: " + cycle + member,
                 "a mixture cannot contain itself, directly or through another; remove one of these entries");
      }
      visit(j->second);
    }
    path.pop_back();
    state[i] = 2;
    if (already(m.name, m.at, seqio::MixtureRegistry::find(m.name).get(), "mixture")) return;
    declared_at()[m.name] = {declaration_key(m.at),
                             seqio::MixtureRegistry::add(build_mixture(cfg, m.scope, m.name, m.at)).get()};
    out.push_back(m.name);
  };
  for (size_t i = 0; i < mixtures.size(); ++i) visit(i);
  return out;
}

std::vector<std::string> load_task_file(const std::string& path, const std::vector<std::string>& search_paths) {
  register_configurables();
  gin::Config cfg;
  gin::LoadOptions opt;
  opt.search_paths = search_paths;
  cfg.parse_file(path, opt);
  return register_declared(cfg);
}

void load_module(const std::string& path, const std::vector<std::string>& search_paths) {
  if (path.ends_with(".gin")) load_task_file(path, search_paths);
  else seqio::load_shared_module(path);
}

std::vector<std::string> load_declared_tasks(const Config& cfg, const std::vector<std::string>& search_paths) {
  std::vector<std::string> out = register_declared(cfg);
  std::vector<Value> modules;
  if (cfg.find_macro("MIXTURE_OR_TASK_MODULE")) modules.push_back(cfg.macro_value("MIXTURE_OR_TASK_MODULE"));
  for (const auto& b : cfg.bindings())
    if (b.configurable == "utils.DatasetConfig" && b.param == "module") modules.push_back(cfg.resolve(b.value));
  std::set<std::string> done;
  for (const auto& m : modules) {
    if (m.is_none()) continue;
    for (const auto& v : m.is_sequence() ? m.as_list() : std::vector<Value>{m}) {
      const std::string path = v.as_string();
      if (!done.insert(path).second) continue;
      if (!path.ends_with(".gin") && !path.ends_with(".so"))
        throw GinError(v.where(), "MIXTURE_OR_TASK_MODULE '" + path + "' is neither a task file (.gin) nor a shared library (.so)",
                       "Python modules cannot be imported here: declare the tasks in a .gin task file (docs/seqio.md)");
      load_module(path, search_paths);
    }
  }
  return out;
}

}  // namespace t5x::task_file
