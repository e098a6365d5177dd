#include "seqio/cache.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include "seqio/errors.h"
#include "seqio/json_io.h"
#include "seqio/mixture.h"
#include "seqio/task.h"
#include "seqio/tfrecord.h"

namespace fs = std::filesystem;

namespace seqio {

namespace {
constexpr const char* kVersion = "t5x.cpp-seqio-0.1";
constexpr const char* kRewriteHint = " (hint: the cache is damaged; rerun seqio cache --overwrite)";
// Shard names have 5 digits (seqio's -%05d-of-%05d).
constexpr uint64_t kMaxShards = 99999;

std::string shard_name(const std::string& split, int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), ".tfrecord-%05d-of-%05d", i, n);
  return split + buf;
}

void write_json(const fs::path& p, const nlohmann::json& j) {
  std::ofstream f(p);
  f << j.dump(2) << "\n";
  f.close();
  if (f.fail()) throw DataError(p.string() + ": write failed (hint: is the disk full?)");
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  if (!f) throw DataError(p.string() + ": missing" + kRewriteHint);
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(p.string() + ": invalid JSON: " + e.what() + kRewriteHint);
  }
}

const char* value_dtype(const FeatureValue& v) {
  if (std::holds_alternative<Tokens>(v)) return "int32";
  if (std::holds_alternative<int64_t>(v)) return "int64";
  if (std::holds_alternative<double>(v)) return "float32";
  return "string";
}
}  // namespace

CacheWriteResult write_cache(const Task& task, const std::string& output_dir, const CacheWriteOptions& opt) {
  if (!task.supports_caching())
    throw DataError("task '" + task.name() + "' has no CacheDatasetPlaceholder, so there is nothing to cache "
                    "(hint: add @seqio.CacheDatasetPlaceholder() to the task's preprocessors, after the deterministic steps; "
                    "Preprocessor::CachePlaceholder() in C++)");
  CacheWriteResult res;
  const fs::path dir = fs::path(output_dir) / task.cache_subdir();
  res.dir = dir.string();
  if (fs::exists(dir / "COMPLETED") && !opt.overwrite)
    throw DataError(dir.string() + ": a completed cache exists (hint: pass --overwrite to replace it)");
  // What the write replaces must be a cache (complete, or one whose split
  // rewrite stopped midway): a directory of other files, or a file, is not
  // taken for one and removed.
  if (std::error_code ec; fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec))
      throw DataError(dir.string() + ": exists and is not a directory, so it is no seqio cache to replace "
                      "(hint: choose another output directory, or move it away)");
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string f = e.path().filename().string();
      const bool cache_file = f == "COMPLETED" || f.find(".tfrecord-") != std::string::npos ||
                              ((f.rfind("info.", 0) == 0 || f.rfind("stats.", 0) == 0) && f.ends_with(".json"));
      if (!cache_file || e.is_directory())
        throw DataError(dir.string() + ": holds '" + f + "', which is not a seqio cache's file, so the directory " +
                        "is not replaced (hint: choose another output directory, or move its files away)");
    }
  }
  std::vector<std::string> splits = opt.splits.empty() ? task.splits() : opt.splits;
  // The new files are written to a staging directory beside the cache and
  // swapped in only once every split is done, so that a failure (bad data,
  // an unknown split, a full disk) leaves an existing cache as it was.
  const std::string pid = std::to_string(::getpid());
  const fs::path stage = dir.parent_path() / (dir.filename().string() + ".tmp-" + pid);
  std::error_code ec;
  fs::remove_all(stage, ec);
  fs::create_directories(stage, ec);
  if (ec) throw DataError(stage.string() + ": cannot create directory: " + ec.message());
  struct RemoveOnFailure {
    fs::path p;
    ~RemoveOnFailure() {
      std::error_code e;
      if (!p.empty()) fs::remove_all(p, e);
    }
  } staged{stage};

  for (const auto& split : splits) {
    const int n = static_cast<int>(task.source().list_shards(split).size());
    nlohmann::json features = nlohmann::json::object();
    features["_seqio_key"] = {{"dtype", "int64"}, {"shape", nlohmann::json::array()}};
    int64_t examples = 0;
    std::map<std::string, int64_t> tokens, max_tokens;
    for (int s = 0; s < n; ++s) {
      TFRecordWriter w((stage / shard_name(split, s, n)).string());
      auto ds = task.get_precache_dataset(split, ShardInfo{s, n}, opt.seed, opt.num_threads);
      Example ex;  // carries "_seqio_key" (PipelineSpec::emit_keys)
      while (ds->next(ex)) {
        for (const auto& [k, v] : ex) {
          if (!features.contains(k)) {
            nlohmann::json shape = std::holds_alternative<Tokens>(v) ? nlohmann::json::array({nullptr})
                                                                    : nlohmann::json::array();
            features[k] = {{"dtype", value_dtype(v)}, {"shape", shape}};
          }
          if (auto* t = std::get_if<Tokens>(&v)) {
            int32_t eos = 1;
            auto of = task.output_features().find(k);
            if (of != task.output_features().end() && of->second.vocabulary && of->second.vocabulary->eos_id())
              eos = *of->second.vocabulary->eos_id();
            int64_t c = 0;
            for (int32_t id : *t) c += (id != 0 && id != eos);
            tokens[k] += c;
            max_tokens[k] = std::max(max_tokens[k], c);
          }
        }
        w.write(example_to_tf_example(ex));
        ++examples;
      }
      w.close();
    }
    nlohmann::json stats = {{"examples", examples}};
    for (const auto& [k, v] : tokens) {
      stats[k + "_tokens"] = v;
      stats[k + "_max_tokens"] = max_tokens[k];
    }
    write_json(stage / ("info." + split + ".json"),
               {{"features", features}, {"num_shards", n}, {"seqio_version", kVersion}});
    write_json(stage / ("stats." + split + ".json"), stats);
    res.examples[split] = examples;
  }
  auto fail = [&](const fs::path& p, const std::error_code& e) {
    throw DataError(p.string() + ": cannot move the new cache files into place: " + e.message() +
                    " (hint: check the directory's permissions and free space, then rerun seqio cache --overwrite)");
  };
  if (opt.splits.empty() || !fs::exists(dir / "COMPLETED")) {
    // The whole cache: the old directory (if any) set aside, the new one
    // renamed into its place, then the old one removed.
    std::ofstream(stage / "COMPLETED").close();
    const fs::path old = dir.parent_path() / (dir.filename().string() + ".old-" + pid);
    fs::remove_all(old, ec);
    if (fs::exists(dir)) {
      fs::rename(dir, old, ec);
      if (ec) fail(dir, ec);
    }
    fs::rename(stage, dir, ec);
    if (ec) {
      std::error_code back;
      if (fs::exists(old)) fs::rename(old, dir, back);  // the old cache returns to its place
      fail(dir, ec);
    }
    staged.p = old;
  } else {
    // Some splits of a completed cache: the others stay; these splits' old
    // shards and metadata are replaced (the marker is off meanwhile).
    fs::remove(dir / "COMPLETED", ec);
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string f = e.path().filename().string();
      for (const auto& split : splits)
        if (f.rfind(split + ".tfrecord-", 0) == 0 || f == "info." + split + ".json" || f == "stats." + split + ".json")
          fs::remove(e.path(), ec);
    }
    for (const auto& e : fs::directory_iterator(stage)) {
      fs::rename(e.path(), dir / e.path().filename(), ec);
      if (ec) fail(dir / e.path().filename(), ec);
    }
    std::ofstream(dir / "COMPLETED").close();
  }
  return res;
}

namespace {
std::mutex g_cache_dirs_mu;
std::vector<std::string>& global_cache_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}
}  // namespace

void add_global_cache_dirs(const std::vector<std::string>& dirs) {
  std::lock_guard lock(g_cache_dirs_mu);
  auto& g = global_cache_dirs();
  g.insert(g.end(), dirs.begin(), dirs.end());
}

void set_global_cache_dirs(const std::vector<std::string>& dirs) {
  std::lock_guard lock(g_cache_dirs_mu);
  global_cache_dirs() = dirs;
}

std::vector<std::string> get_global_cache_dirs() {
  std::lock_guard lock(g_cache_dirs_mu);
  return global_cache_dirs();
}

std::vector<std::string> cache_search_dirs(const std::vector<std::string>& cache_dirs) {
  std::vector<std::string> all = cache_dirs;
  for (auto& d : get_global_cache_dirs()) all.push_back(std::move(d));
  return all;
}

std::vector<std::string> tasks_without_cache_step(const std::string& mixture_or_task) {
  std::vector<std::string> out;
  for (const auto& t : get_subtasks(mixture_or_task))
    if (!t->supports_caching()) out.push_back(t->name());
  return out;
}

std::optional<std::string> find_cache_dir(const Task& task, const std::vector<std::string>& cache_dirs) {
  for (const auto& d : cache_search_dirs(cache_dirs)) {
    fs::path p = fs::path(d) / task.cache_subdir();
    if (fs::exists(p / "COMPLETED")) return p.string();
  }
  return std::nullopt;
}

namespace {
class CachedDataSource : public DataSource {
 public:
  explicit CachedDataSource(const fs::path& dir) : dir_(dir) {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string f = e.path().filename().string();
      if (f.rfind("info.", 0) == 0 && f.size() > 10 && f.substr(f.size() - 5) == ".json") {
        const std::string split = f.substr(5, f.size() - 10);
        const std::string info_path = e.path().string(), stats_path = (dir / ("stats." + split + ".json")).string();
        const auto info = read_json(info_path);
        const auto stats = read_json(stats_path);
        const auto features = info.find("features");  // end() unless an object has it
        if (features == info.end() || !features->is_object())
          throw DataError(info_path + ": field 'features' is missing or not an object" + kRewriteHint);
        std::map<std::string, DType> desc;
        for (auto it = features->begin(); it != features->end(); ++it) {
          const auto& spec = it.value();
          const std::string field = "features." + it.key();
          if (!spec.is_object() || !spec.contains("dtype") || !spec["dtype"].is_string() || !spec.contains("shape") ||
              !spec["shape"].is_array())
            throw DataError(info_path + ": field '" + field + "' is not {\"dtype\": NAME, \"shape\": [...]}" +
                            kRewriteHint);
          try {
            desc[it.key()] = dtype_from_name(spec["dtype"].get<std::string>());
          } catch (const std::invalid_argument& err) {
            throw DataError(info_path + ": field '" + field + ".dtype': " + err.what() + kRewriteHint);
          }
          // write_cache stores every token sequence ([None]) as int32; another
          // dtype there was read as int32 without a word.
          if (!spec["shape"].empty()) {
            if (desc[it.key()] != DType::kInt32)
              throw DataError(info_path + ": field '" + field + ".dtype' is " + spec["dtype"].dump() +
                              ", but a sequence (shape [None]) is int32 in a cache" + kRewriteHint);
          }
        }
        int n = 0;
        int64_t examples = 0;
        try {
          n = static_cast<int>(json_uint_field(info, "num_shards", info_path, "num_shards", kMaxShards));
          examples = json_count_field(stats, "examples", stats_path, "examples");
        } catch (const DataError& err) {
          throw DataError(err.what() + std::string(kRewriteHint));
        }
        std::vector<std::string> files;
        for (int s = 0; s < n; ++s) {
          fs::path p = dir / shard_name(split, s, n);
          if (!fs::exists(p)) throw DataError(p.string() + ": cache shard missing (hint: rerun seqio cache --overwrite)");
          files.push_back(p.string());
        }
        splits_[split] = std::make_unique<TFExampleDataSource>(
            std::map<std::string, std::vector<std::string>>{{split, files}}, desc);
        examples_[split] = examples;
      }
    }
  }
  std::vector<std::string> splits() const override {
    std::vector<std::string> s;
    for (const auto& [k, v] : splits_) s.push_back(k);
    return s;
  }
  std::vector<std::string> list_shards(const std::string& split) const override { return get(split).list_shards(split); }
  std::unique_ptr<RecordReader> open_shard(const std::string& split, size_t shard) const override {
    return get(split).open_shard(split, shard);
  }
  std::optional<int64_t> num_input_examples(const std::string& split) const override {
    auto it = examples_.find(split);
    return it == examples_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }

 private:
  const DataSource& get(const std::string& split) const {
    auto it = splits_.find(split);
    if (it == splits_.end()) throw DataError(dir_.string() + ": the cache has no split '" + split + "'");
    return *it->second;
  }
  fs::path dir_;
  std::map<std::string, std::unique_ptr<TFExampleDataSource>> splits_;
  std::map<std::string, int64_t> examples_;
};
}  // namespace

std::shared_ptr<const DataSource> open_cache_source(const std::string& task_cache_dir) {
  const fs::path dir(task_cache_dir);
  if (!fs::exists(dir)) throw DataError(task_cache_dir + ": no cache directory");
  if (!fs::exists(dir / "COMPLETED"))
    throw DataError(task_cache_dir + ": cache is incomplete (no COMPLETED marker; was `seqio cache` interrupted?) "
                    "(hint: rerun seqio cache with --overwrite)");
  return std::make_shared<CachedDataSource>(dir);
}

}  // namespace seqio
