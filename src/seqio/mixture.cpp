#include "seqio/mixture.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "seqio/cache.h"
#include "seqio/errors.h"

namespace seqio {

namespace {
uint64_t name_hash(const std::string& s) {  // FNV-1a, stable across platforms
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

Mixture::Mixture(std::string name, std::vector<MixtureEntry> entries, std::optional<double> default_rate)
    : name_(std::move(name)) {
  for (auto& e : entries) {
    std::optional<Rate> rate = e.rate;
    if (!rate) {
      if (!default_rate)
        throw std::invalid_argument("[Mixture] '" + name_ + "': need a rate for each task (no rate for '" + e.name +
                                    "' and no default_rate)");
      rate = *default_rate;
    }
    if (const double* r = std::get_if<double>(&*rate); r && !(std::isfinite(*r) && *r >= 0))
      throw std::invalid_argument("[Mixture] '" + name_ + "': the rate of '" + e.name + "' is " + std::to_string(*r) +
                                  "; rates are finite and >= 0 (0 leaves the task out)");
    if (auto t = TaskRegistry::find(e.name)) {
      direct_.emplace_back(t, *rate);
    } else if (auto m = MixtureRegistry::find(e.name)) {
      if (!std::holds_alternative<double>(*rate))
        throw std::invalid_argument("[Mixture] '" + name_ + "': the rate of sub-mixture '" + e.name +
                                    "' must be a number");
      sub_.emplace_back(m, std::get<double>(*rate));
    } else {
      throw std::invalid_argument("[Mixture] '" + name_ + "': no Task or Mixture named '" + e.name + "'");
    }
  }
  auto ts = tasks();
  if (ts.empty()) throw std::invalid_argument("[Mixture] '" + name_ + "' has no tasks");
  auto keys = [](const Task& t) {
    std::set<std::string> k;
    for (const auto& [n, f] : t.output_features()) k.insert(n);
    return k;
  };
  for (const auto& t : ts)
    if (keys(*t) != keys(*ts[0]))
      throw std::invalid_argument("[Mixture] '" + name_ + "': tasks '" + ts[0]->name() + "' and '" + t->name() +
                                  "' have different output features");
}

std::vector<std::shared_ptr<const Task>> Mixture::tasks() const {
  std::map<std::string, std::shared_ptr<const Task>> all;
  for (const auto& [t, r] : direct_) all[t->name()] = t;
  for (const auto& [m, r] : sub_)
    for (const auto& t : m->tasks()) all[t->name()] = t;
  std::vector<std::shared_ptr<const Task>> out;
  for (auto& [k, v] : all) out.push_back(v);
  return out;
}

double Mixture::get_rate(const Task& task) const {
  double rate = 0;
  for (const auto& [t, r] : direct_) {
    if (t->name() != task.name()) continue;
    rate += std::holds_alternative<double>(r) ? std::get<double>(r) : std::get<RateFn>(r)(task);
  }
  for (const auto& [m, r] : sub_) {
    auto ts = m->tasks();
    if (std::any_of(ts.begin(), ts.end(), [&](const auto& t) { return t->name() == task.name(); }))
      rate += r * m->get_rate(task) / m->total_rate();
  }
  return rate;
}

double Mixture::total_rate() const {
  double s = 0;
  for (const auto& t : tasks()) s += get_rate(*t);
  return s;
}

namespace {
// seqio's Mixture._check_compatible_features: per output feature, the same
// vocabulary and dtype in every task. A SentencePiece vocabulary compares by
// its settings, the model's path string included (seqio 0.0.20's
// SentencePieceVocabulary.__eq__ compares __getstate__()).
void check_same_output_features(const Mixture& mix, const Task& first, const Task& t) {
  auto describe = [](const Feature& f) {
    return std::string(dtype_name(f.dtype)) + (f.vocabulary ? ", vocabulary " + f.vocabulary->spec() : "");
  };
  const auto& a = first.output_features();
  const auto& b = t.output_features();
  for (const auto& [k, g] : a) {
    const auto it = b.find(k);
    if (it == b.end()) continue;  // the names were compared when the Mixture was made
    const Feature& f = it->second;
    if (f.dtype != g.dtype || bool(f.vocabulary) != bool(g.vocabulary) ||
        (f.vocabulary && !(*f.vocabulary == *g.vocabulary))) {
      std::string hint;
      if (f.vocabulary && g.vocabulary && f.dtype == g.dtype)
        hint = "\n  hint: seqio compares vocabularies by their settings, the model's path string included: "
               "name the same file the same way in every task of the mixture";
      throw DataError("mixture '" + mix.name() + "': feature '" + k + "' differs between task '" + first.name() +
                      "' (" + describe(g) + ") and task '" + t.name() + "' (" + describe(f) + ")" + hint);
    }
  }
}

class MixtureDataset : public Dataset {
 public:
  MixtureDataset(const Mixture& mix, const DatasetOptions& opt) : opt_(opt) {
    if (opt.resume && opt.start != 0) throw std::invalid_argument("[get_dataset] start and resume are exclusive");
    seed_ = opt.seed ? *opt.seed : std::random_device{}() * 0x100000001ull + std::random_device{}();
    std::shared_ptr<const Task> first;
    for (const auto& t : mix.tasks()) {
      auto splits = t->splits();
      if (std::find(splits.begin(), splits.end(), opt.split) == splits.end()) continue;  // seqio warns and skips
      if (first) check_same_output_features(mix, *first, *t);
      else {
        first = t;
      }
      Member m;
      m.task = t;
      m.rate = mix.get_rate(*t);
      if (!(std::isfinite(m.rate) && m.rate >= 0))  // a rate function's value
        throw DataError("mixture '" + mix.name() + "': the rate of task '" + t->name() + "' is " +
                        std::to_string(m.rate) + "; rates are finite and >= 0");
      DatasetOptions o = opt;
      o.seed = derive_seed(seed_, name_hash(t->name()));
      o.start = 0;
      o.resume.reset();
      if (opt.resume) {
        auto it = opt.resume->tasks.find(t->name());
        if (it != opt.resume->tasks.end()) {
          Position p;
          p.stream = it->second;
          o.resume = p;
          m.pos = it->second;
        }
        m.exhausted = std::find(opt.resume->exhausted.begin(), opt.resume->exhausted.end(), t->name()) !=
                      opt.resume->exhausted.end();
      }
      m.ds = t->get_dataset(o);
      members_.push_back(std::move(m));
    }
    if (members_.empty()) throw DataError("mixture '" + mix.name() + "': no task has split '" + opt.split + "'");
    double total = 0;
    for (const Member& m : members_) total += m.rate;
    if (std::isinf(total)) {
      // Finite rates whose sum overflows (1e308 twice) drew every example
      // from one task: rates are relative, so they are scaled to the largest.
      double largest = 0;
      for (const Member& m : members_) largest = std::max(largest, m.rate);
      total = 0;
      for (Member& m : members_) total += (m.rate /= largest);
    }
    if (!(total > 0))
      throw DataError("mixture '" + mix.name() + "': every task's rate is 0 for split '" + opt.split +
                      "', so it yields nothing (give one task a rate > 0)");
    if (opt.resume) step_ = opt.resume->stream.emitted;
    Example tmp;
    for (int64_t i = 0; i < opt.start && next(tmp); ++i) {
    }
  }

  bool next(Example& out) override {
    if (done_) return false;
    for (uint64_t attempt = 0;; ++attempt) {
      double total = 0;
      for (const auto& m : members_)
        if (!m.exhausted) total += m.rate;
      if (total <= 0) {
        done_ = true;
        return false;
      }
      const uint64_t bits = derive_seed(derive_seed(seed_, static_cast<uint64_t>(step_)), attempt);
      const double u = static_cast<double>(bits >> 11) * 0x1.0p-53 * total;
      double acc = 0;
      Member* pick = nullptr;
      for (auto& m : members_) {
        if (m.exhausted || m.rate <= 0) continue;
        acc += m.rate;
        pick = &m;
        if (u < acc) break;
      }
      Example ex;
      if (pick->ds->next(ex)) {
        out.clear();
        for (const auto& [k, f] : pick->task->output_features()) {
          auto it = ex.find(k);
          if (it != ex.end()) out.emplace(k, std::move(it->second));
        }
        pick->pos = pick->ds->position().stream;
        ++step_;
        return true;
      }
      pick->exhausted = true;
      if (opt_.stop_on_empty) {
        done_ = true;
        return false;
      }
    }
  }

  Position position() const override {
    Position p;
    p.stream.emitted = step_;
    for (const auto& m : members_) {
      p.tasks[m.task->name()] = m.pos;
      if (m.exhausted) p.exhausted.push_back(m.task->name());
    }
    return p;
  }

  PipelineStats stats() const override {
    PipelineStats s;
    for (const auto& m : members_) {
      auto t = m.ds->stats();
      s.records_read += t.records_read;
      s.examples_dropped += t.examples_dropped;
      for (const auto& [k, v] : t.trimmed_examples) s.trimmed_examples[k] += v;
      for (const auto& [k, v] : t.trimmed_tokens) s.trimmed_tokens[k] += v;
    }
    s.examples_emitted = step_;
    return s;
  }

 private:
  struct Member {
    std::shared_ptr<const Task> task;
    double rate = 0;
    std::unique_ptr<Dataset> ds;
    StreamPosition pos;
    bool exhausted = false;
  };
  DatasetOptions opt_;
  uint64_t seed_ = 0;
  std::vector<Member> members_;
  int64_t step_ = 0;
  bool done_ = false;
};
}  // namespace

std::unique_ptr<Dataset> Mixture::get_dataset(const DatasetOptions& options) const {
  return std::make_unique<MixtureDataset>(*this, options);
}

// ---------------------------------------------------------------- registry

namespace {
struct MixRegistry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Mixture>> items;
};
MixRegistry& mix_registry() {
  static MixRegistry r;
  return r;
}
}  // namespace

std::shared_ptr<const Mixture> MixtureRegistry::add(std::shared_ptr<const Mixture> m) {
  if (!m) throw std::invalid_argument("[MixtureRegistry::add] null mixture");
  auto& r = mix_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.items.emplace(m->name(), m).second)
    throw std::invalid_argument("[MixtureRegistry::add] Attempting to register duplicate provider: " + m->name());
  return m;
}
std::shared_ptr<const Mixture> MixtureRegistry::find(const std::string& name) {
  auto& r = mix_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.items.find(name);
  return it == r.items.end() ? nullptr : it->second;
}
std::shared_ptr<const Mixture> MixtureRegistry::get(const std::string& name) {
  if (auto m = find(name)) return m;
  throw std::invalid_argument("[MixtureRegistry::get] Provider name not registered: '" + name + "'");
}
std::vector<std::string> MixtureRegistry::names() {
  auto& r = mix_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> n;
  for (const auto& [k, v] : r.items) n.push_back(k);
  return n;
}
void MixtureRegistry::remove(const std::string& name) {
  auto& r = mix_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.items.erase(name);
}
void MixtureRegistry::reset() {
  auto& r = mix_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.items.clear();
}

RateFn mixing_rate_num_examples(std::optional<double> maximum, double scale, double temperature, std::string split,
                                std::vector<std::string> cache_dirs) {
  return [=](const Task& task) {
    std::optional<int64_t> n;
    if (auto dir = find_cache_dir(task, cache_dirs)) n = open_cache_source(*dir)->num_input_examples(split);
    if (!n) n = task.source().num_input_examples(split);
    if (!n) {
      int64_t count = 0;
      const auto shards = task.source().list_shards(split);
      for (size_t s = 0; s < shards.size(); ++s) {
        auto r = task.source().open_shard(split, s);
        Example ex;
        while (r->next(ex)) ++count;
      }
      n = count;
    }
    double rate = static_cast<double>(*n) * scale;
    if (maximum) rate = std::min(rate, *maximum);
    if (temperature != 1.0) rate = std::pow(rate, 1.0 / temperature);
    return rate;
  };
}

std::variant<std::shared_ptr<const Task>, std::shared_ptr<const Mixture>> get_mixture_or_task(const std::string& name) {
  if (auto m = MixtureRegistry::find(name)) return m;
  if (auto t = TaskRegistry::find(name)) return t;
  auto all = TaskRegistry::names();
  auto mn = MixtureRegistry::names();
  all.insert(all.end(), mn.begin(), mn.end());
  std::string hint;
  for (const auto& c : closest_names(name, all)) hint += (hint.empty() ? "" : ", ") + c;
  throw std::invalid_argument("[get_mixture_or_task] No Task or Mixture found with name '" + name + "'" +
                              (hint.empty() ? "" : " (closest: " + hint + ")"));
}

std::unique_ptr<Dataset> get_dataset(const std::string& name, const DatasetOptions& options) {
  auto p = get_mixture_or_task(name);
  if (auto* m = std::get_if<std::shared_ptr<const Mixture>>(&p)) return (*m)->get_dataset(options);
  return std::get<std::shared_ptr<const Task>>(p)->get_dataset(options);
}

std::vector<std::shared_ptr<const Task>> get_subtasks(const std::string& name) {
  auto p = get_mixture_or_task(name);
  if (auto* m = std::get_if<std::shared_ptr<const Mixture>>(&p)) return (*m)->tasks();
  return {std::get<std::shared_ptr<const Task>>(p)};
}

}  // namespace seqio
