#include "t5x/checkpoints/checkpoint_dir.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <exception>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "t5x/checkpoints/fault_inject.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/meshtf_mapping.h"
#include "t5x/checkpoints/tf_bundle.h"

namespace t5x {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMsgpackName = "checkpoint";

bool is_float_dtype(const std::string& d) {
  return d == "float32" || d == "bfloat16" || d == "float16";
}

void barrier(const SaveOptions& opt, const std::string& tag) {
  if (opt.barrier) opt.barrier(tag);
}

std::vector<std::string> list_names(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  return out;
}

constexpr const char* kManifestPartPrefix = "manifest.t5xcpp.part-";

std::string manifest_part_name(int process_index, int process_count) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "%s%03d-of-%03d.json", kManifestPartPrefix, process_index, process_count);
  return buf;
}

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The manifest of the files in `tmp` (all but the manifest and its parts):
// digests from `own` (this process's writes) or the other processes' part
// files where the size matches, else read back from disk.
CheckpointManifest collect_manifest(const std::string& tmp, const std::map<std::string, FileDigest>& own) {
  std::map<std::string, FileDigest> noted = own;
  std::error_code ec;
  for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind(kManifestPartPrefix, 0) != 0) continue;
    try {
      for (auto& [p, d] : CheckpointManifest::from_json(fileio::read_text(it->path().string()), n).files)
        noted.emplace(p, d);
    } catch (const CheckpointError&) {
      // An unreadable part: its files are read back below.
    }
  }
  CheckpointManifest m;
  for (fs::recursive_directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string rel = fs::relative(it->path(), tmp, ec).generic_string();
    if (ec) throw CheckpointError("cannot list '" + tmp + "': " + ec.message());
    if (rel.rfind("manifest.t5xcpp.", 0) == 0) continue;
    auto n = noted.find(rel);
    const uint64_t size = it->file_size(ec);
    m.files[rel] = n != noted.end() && !ec && n->second.bytes == size ? n->second : digest_file(it->path().string());
  }
  if (ec) throw CheckpointError("cannot list '" + tmp + "': " + ec.message());
  return m;
}

// std::regex has no escaping helper; prefixes are plain names in practice.
std::string regex_escape(const std::string& s) {
  static const std::string special = R"(\^$.|?*+()[]{})";
  std::string r;
  for (char c : s) { if (special.find(c) != std::string::npos) r += '\\'; r += c; }
  return r;
}

}  // namespace

std::string checkpoint_dir_for_step(const std::string& model_dir, int64_t step,
                                    const std::string& prefix) {
  return fileio::join(model_dir, prefix + "_" + std::to_string(step));
}

std::string dataset_state_file_name(int process_index, int process_count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "train_ds-%03d-of-%03d.json", process_index, process_count);
  return buf;
}

SaveLeaf SaveLeaf::whole(std::string path, HostTensor data) {
  std::vector<int64_t> shape = data.shape;
  SaveLeaf l = sharded(std::move(path), std::move(data), shape, IndexBox::full(shape));
  l.chunks = t5x_chunk_shape(shape, dtype_itemsize(l.data.dtype));
  return l;
}

std::string save_converted_checkpoint(const std::string& model_dir, int64_t step, std::vector<SaveLeaf> leaves,
                                      const ZarrCompressor& compressor, bool durable) {
  // state/step is int32 (t5x's TrainState): a larger step would be stored
  // wrapped, and a negative one named checkpoint_-1.
  if (step < 0 || step > INT32_MAX)
    throw CheckpointError(fileio::join(model_dir, "checkpoint_" + std::to_string(step)) + ": step " +
                          std::to_string(step) + " is outside [0, 2^31 - 1] (state/step is int32); choose another --step");
  leaves.push_back(SaveLeaf::inline_array(
      "state/step", HostTensor::from_values<int32_t>("int32", {}, {int32_t(step)})));
  // A run (or an earlier conversion) there would resume from, or mix with, the
  // new model: refuse before writing anything.
  std::string held;
  auto add = [&](const std::string& n) { held += (held.empty() ? "" : ", ") + n; };
  for (int64_t s : all_steps(model_dir)) add("checkpoint_" + std::to_string(s));
  for (const auto& t : list_temp_dirs(model_dir)) add(fs::path(t).filename().string());
  for (const char* f : {"model.gin", "config.gin"})
    if (fileio::exists(fileio::join(model_dir, f))) add(f);
  if (!held.empty())
    throw CheckpointError(model_dir + " already holds " + held + " (a run or an earlier conversion); nothing was "
                          "written\n  hint: choose a new output directory");
  SaveOptions so;
  so.compressor = compressor;
  so.save_dtype = "";
  so.durable = durable;
  fileio::make_dirs(model_dir);
  SaveResult r = save_checkpoint(model_dir, step, leaves, so);
  if (r.skipped_existing)
    throw CheckpointError(r.dir + " already exists; choose another --step or MODEL_DIR");
  return r.dir;
}

SaveResult save_checkpoint(const std::string& model_dir, int64_t step,
                           const std::vector<SaveLeaf>& leaves, const SaveOptions& opt) {
  if (opt.process_index < 0 || opt.process_index >= opt.process_count)
    throw std::invalid_argument("[save_checkpoint] process_index out of range");
  SaveResult res;
  res.dir = checkpoint_dir_for_step(model_dir, step, opt.prefix);
  if (fileio::exists(res.dir)) {  // t5x: an existing final dir means this step is saved
    // A file of that name is no save: skipping would lose this step's checkpoint.
    if (!fileio::is_dir(res.dir))
      throw CheckpointError(res.dir + " is a file, not a checkpoint directory: step " + std::to_string(step) +
                            " cannot be saved\n  hint: move or delete it (`t5x train` moves it aside when it starts)");
    res.skipped_existing = true;
    return res;
  }
  const int64_t ts = opt.timestamp >= 0 ? opt.timestamp : int64_t(std::time(nullptr));
  const std::string tmp = res.dir + ".tmp-" + std::to_string(ts);

  // Validate and prepare leaves (cast "target/" to the save dtype, as t5x).
  std::set<std::string> seen;
  for (const auto& l : leaves) {
    if (!seen.insert(l.path).second)
      throw std::invalid_argument("[save_checkpoint] duplicate leaf '" + l.path + "'");
    if (l.partitioned) {
      if (l.global_shape.size() != l.box.start.size() || l.data.shape != l.box.extent())
        throw std::invalid_argument("[save_checkpoint] leaf '" + l.path + "': slice " +
                                    l.box.to_string() + " does not match data shape " +
                                    l.data.shape_string() + " / global rank");
    }
  }
  auto stored_dtype = [&](const SaveLeaf& l) {
    bool cast = !opt.save_dtype.empty() && l.path.rfind("target/", 0) == 0 &&
                is_float_dtype(l.data.dtype) && l.data.dtype != opt.save_dtype;
    return cast ? opt.save_dtype : l.data.dtype;
  };
  auto spec_for = [&](const SaveLeaf& l) {
    TensorStoreSpec s;
    s.dtype = stored_dtype(l);
    s.path = ts_dir_name(l.path);
    s.shape = l.global_shape;
    s.chunks = l.chunks.empty() ? l.box.extent() : l.chunks;
    for (auto& c : s.chunks) c = std::max<int64_t>(1, c);
    s.compressor = l.compressor ? *l.compressor : opt.compressor;
    return s;
  };

  if (opt.process_index == 0) {
    fileio::make_dirs(tmp);
  }
  // A save that fails (a full disk) takes its half-written directory away
  // when this process wrote all of it; under several processes the next
  // start removes it (remove_temp_dirs).
  struct RemoveOnThrow {
    std::string dir;
    bool armed;
    ~RemoveOnThrow() {
      std::error_code ec;
      if (armed && std::uncaught_exceptions() > 0) fs::remove_all(dir, ec);
    }
  } cleanup{tmp, opt.process_count == 1};
  barrier(opt, "checkpointer:make_dir:" + tmp);
  if (opt.process_index != 0) fileio::make_dirs(tmp);  // tolerate non-shared fs in tests

  // Size and CRC of every file this process writes (relative path), for the manifest.
  std::mutex noted_mu;
  std::map<std::string, FileDigest> noted;
  auto note = [&](const std::string& rel, std::span<const uint8_t> bytes) {
    const FileDigest d = FileDigest::of(bytes);
    std::lock_guard<std::mutex> lock(noted_mu);
    noted[rel] = d;
  };

  // Phase 1: every process writes the chunks it owns.
  for (const auto& l : leaves) {
    if (!l.partitioned || !l.write) continue;
    TensorStoreSpec s = spec_for(l);
    ZarrMetadata m;
    m.shape = s.shape;
    m.chunks = s.chunks;
    m.dtype = s.dtype;
    m.compressor = s.compressor;
    const std::string adir = fileio::join(tmp, s.path);
    zarr_write_metadata(adir, m, opt.durable);
    note(s.path + "/.zarray", as_bytes(m.to_json()));
    HostTensor data = s.dtype == l.data.dtype ? HostTensor{} : cast_host_tensor(l.data, s.dtype);
    const HostTensor& src = s.dtype == l.data.dtype ? l.data : data;
    ZarrWriteOptions wo{opt.durable, opt.num_threads};
    wo.on_chunk = [&](const std::string& key, std::span<const uint8_t> bytes) { note(s.path + "/" + key, bytes); };
    res.bytes_written += zarr_write_box(adir, m, src, l.box, wo);
    if (opt.durable) fileio::fsync_dir(adir);
    fault_point("save_chunks", step);
  }
  if (opt.dataset_state_json) {
    const std::string name = dataset_state_file_name(opt.process_index, opt.process_count);
    fileio::write_text(fileio::join(tmp, name), *opt.dataset_state_json, opt.durable);
    note(name, as_bytes(*opt.dataset_state_json));
    res.bytes_written += opt.dataset_state_json->size();
  }
  if (opt.process_index != 0)
    fileio::write_text(fileio::join(tmp, manifest_part_name(opt.process_index, opt.process_count)),
                       CheckpointManifest{noted}.to_json(), opt.durable);
  barrier(opt, "checkpointer:tensorstore_write_complete:" + tmp);
  if (opt.crash_before_msgpack) return res;

  // Phase 2: process 0 writes the msgpack last, then renames into place.
  if (opt.process_index == 0) {
    FlatState state;
    for (const auto& l : leaves) {
      if (l.partitioned) state[l.path] = spec_for(l);
      else state[l.path] = stored_dtype(l) == l.data.dtype ? l.data : cast_host_tensor(l.data, stored_dtype(l));
    }
    auto bytes = encode_checkpoint_msgpack(state, 3);
    fileio::write_file(fileio::join(tmp, kMsgpackName), bytes, opt.durable);
    note(kMsgpackName, bytes);
    res.bytes_written += bytes.size();
    // The manifest, last before the commit: a renamed directory always has one.
    const std::string manifest = collect_manifest(tmp, noted).to_json();
    fileio::write_text(fileio::join(tmp, kManifestFile), manifest, opt.durable);
    res.bytes_written += manifest.size();
    for (int p = 1; p < opt.process_count; ++p) {
      std::error_code rm;
      fs::remove(fileio::join(tmp, manifest_part_name(p, opt.process_count)), rm);
    }
    if (opt.durable) fileio::fsync_dir(tmp);
    fault_point("save_before_rename", step);
    std::error_code ec;
    fs::rename(tmp, res.dir, ec);
    if (ec) throw CheckpointError("cannot rename '" + tmp + "' to '" + res.dir + "': " + ec.message());
    cleanup.armed = false;
    fault_point("save_after_rename", step);
    if (opt.durable) fileio::fsync_dir(model_dir);
    if (opt.keep > 0) res.removed_steps = apply_retention(model_dir, opt.keep, opt.prefix);
  }
  barrier(opt, "checkpointer:write_complete:" + res.dir);
  return res;
}

// ---------------------------------------------------------------- reader

namespace {
constexpr const char* kRestoreHint = "\n  hint: restore another checkpoint (`t5x ckpt info DIR` checks one)";

// The manifest of the checkpoint `path` names (nullopt: none, as in t5x's own
// saves and older t5x.cpp ones) and its directory. Every open (eval, infer, a
// fine-tune's initial checkpoint, not only a resume's scan) checks the msgpack
// against it: the msgpack holds the step and the small arrays, which no codec
// checksum guards. The arrays' files are checked as they are read.
std::pair<std::optional<CheckpointManifest>, std::string> check_msgpack_against_manifest(
    const std::string& path, const std::string& file, const std::vector<uint8_t>& bytes) {
  const std::string ckpt_dir = fileio::is_dir(path) ? path : fs::path(file).parent_path().string();
  std::optional<CheckpointManifest> m = read_manifest(ckpt_dir);
  if (!m) return {std::nullopt, ckpt_dir};
  const std::string rel = fs::path(file).lexically_relative(ckpt_dir).generic_string();
  auto it = m->files.find(rel);
  if (it != m->files.end())
    if (auto bad = digest_mismatch(file, FileDigest::of(bytes), it->second)) throw CheckpointError(*bad + kRestoreHint);
  return {std::move(m), ckpt_dir};
}

// How a .zarray contradicts the msgpack's spec of `path` beyond its shape
// (checked by the callers): its dtype (when the spec names one) or chunks
// (when the spec has them); nullopt when it does not.
std::optional<std::string> spec_mismatch(const TensorStoreSpec& s, const ZarrMetadata& m, const std::string& adir,
                                         const std::string& path) {
  auto dims = [](const std::vector<int64_t>& v) {
    std::string out;
    for (auto x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
    return "[" + out + "]";
  };
  if (s.dtype_given && m.dtype != s.dtype)
    return adir + "/.zarray: dtype " + m.dtype + " differs from the msgpack spec of '" + path + "' (" + s.dtype + ")";
  if (!s.chunks.empty() && m.chunks != s.chunks)
    return adir + "/.zarray: chunks " + dims(m.chunks) + " differ from the msgpack spec of '" + path + "' (" +
           dims(s.chunks) + ")";
  return std::nullopt;
}
}  // namespace

bool is_orbax_checkpoint(const std::string& dir) {
  if (fileio::exists(fileio::join(dir, kMsgpackName)) || fileio::exists(fileio::join(dir, "state/checkpoint")))
    return false;
  auto marked = [](const std::string& d) {
    return fileio::exists(fileio::join(d, "manifest.ocdbt")) || fileio::exists(fileio::join(d, "_METADATA"));
  };
  return marked(dir) || marked(fileio::join(dir, "state")) || fileio::exists(fileio::join(dir, "_CHECKPOINT_METADATA"));
}

// Orbax's PyTreeCheckpointHandler (use_ocdbt=True), as t5x's
// OrbaxCheckpointManagerInterface saves the train state: `_METADATA` lists
// the tree's leaves with their value types; arrays ("jax.Array", "np.ndarray",
// "scalar") are zarr v2 arrays in the OCDBT store; "string" leaves are in
// `_strings.json`; "None" and empty containers carry no data.
CheckpointReader CheckpointReader::open_orbax(const std::string& path) {
  CheckpointReader r;
  const bool here = fileio::exists(fileio::join(path, "manifest.ocdbt")) || fileio::exists(fileio::join(path, "_METADATA"));
  r.dir_ = here ? path : fileio::join(path, "state");
  if (!fileio::is_dir(r.dir_))
    throw CheckpointError("'" + path + "' is an Orbax checkpoint without its 'state' item (" + r.dir_ +
                          "): t5x saves the train state there\n  hint: the save did not finish, or this is not a "
                          "t5x checkpoint; use another step");
  const std::string meta_file = fileio::join(r.dir_, "_METADATA");
  if (!fileio::exists(meta_file))
    throw CheckpointError("'" + r.dir_ + "' is an Orbax checkpoint without _METADATA, the tree of its leaves: the "
                          "save did not finish, or the file was removed" + kRestoreHint);
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(fileio::read_text(meta_file));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(meta_file + ": not valid JSON (" + e.what() + ")" + kRestoreHint);
  }
  if (!meta.is_object() || !meta.contains("tree_metadata") || !meta["tree_metadata"].is_object())
    throw CheckpointError(meta_file + ": no \"tree_metadata\" object (not Orbax's PyTree metadata)" + kRestoreHint);
  if (meta.value("use_zarr3", false))
    throw CheckpointError(meta_file + ": the arrays are zarr v3 (use_zarr3=True); t5x.cpp reads Orbax's zarr v2 "
                          "arrays, which t5x writes\n  hint: save with PyTreeCheckpointHandler(use_zarr3=False), "
                          "t5x's setting");
  if (meta.contains("use_ocdbt") && !meta.value("use_ocdbt", true))
    throw CheckpointError(meta_file + ": saved without OCDBT (use_ocdbt=False); t5x.cpp reads the OCDBT layout t5x "
                          "writes (PyTreeCheckpointHandler(use_ocdbt=True))");
  if (!fileio::exists(fileio::join(r.dir_, "manifest.ocdbt")))
    throw CheckpointError("'" + r.dir_ + "' has Orbax's _METADATA but no OCDBT manifest.ocdbt beside it: the file "
                          "was removed, or the checkpoint was not saved with use_ocdbt=True (t5x's setting)" +
                          kRestoreHint);
  r.ocdbt_ = std::make_shared<const OcdbtStore>(OcdbtStore::open(r.dir_));
  std::set<std::string> listed;  // the arrays _METADATA names
  std::optional<nlohmann::json> strings;
  for (const auto& [tuple, entry] : meta["tree_metadata"].items()) {
    const std::string where = meta_file + ": entry " + tuple;
    if (!entry.is_object() || !entry.contains("key_metadata") || !entry["key_metadata"].is_array() ||
        !entry.contains("value_metadata") || !entry["value_metadata"].is_object())
      throw CheckpointError(where + " lacks key_metadata or value_metadata" + kRestoreHint);
    std::string path, name;
    for (const auto& k : entry["key_metadata"]) {
      if (!k.is_object() || !k.contains("key") || !k["key"].is_string())
        throw CheckpointError(where + ": a key without a string \"key\"" + kRestoreHint);
      const std::string key = k["key"].get<std::string>();
      if (key.empty() || key.find('/') != std::string::npos)
        throw CheckpointError(where + ": key '" + key + "' is empty or holds '/', which t5x's parameter names "
                              "never do (t5x.cpp joins a leaf's keys with '/')");
      path += (path.empty() ? "" : "/") + key;
      name += (name.empty() ? "" : ".") + key;
    }
    if (path.empty()) throw CheckpointError(where + ": an empty key tuple" + kRestoreHint);
    const std::string type = entry["value_metadata"].value("value_type", "");
    if (type == "jax.Array" || type == "np.ndarray" || type == "scalar") {
      const std::string zarray_key = name + "/.zarray";
      auto bytes = r.ocdbt_->read(zarray_key);
      if (!bytes)
        throw CheckpointError(r.dir_ + ": '" + path + "' (" + type + ") has no array in the OCDBT store (no key '" +
                              zarray_key + "')" + kRestoreHint);
      ZarrMetadata m = ZarrMetadata::from_json(std::string(bytes->begin(), bytes->end()), r.dir_ + ": " + zarray_key);
      TensorStoreSpec spec;
      spec.kvstore_driver = "ocdbt";
      spec.path = name;
      spec.dtype = m.dtype;
      spec.dtype_given = true;
      spec.shape = m.shape;
      spec.chunks = m.chunks;
      spec.compressor = m.compressor;
      r.leaves_[path] = std::move(spec);
      listed.insert(name);
    } else if (type == "string") {
      if (!strings) {
        const std::string f = fileio::join(r.dir_, "_strings.json");
        try {
          strings = nlohmann::json::parse(fileio::read_text(f));
        } catch (const nlohmann::json::exception& e) {
          throw CheckpointError(f + ": not valid JSON (" + e.what() + ")" + kRestoreHint);
        }
      }
      if (!strings->is_object() || !strings->contains(name) || !(*strings)[name].is_string())
        throw CheckpointError(r.dir_ + "/_strings.json holds no string '" + name + "' for '" + path + "'" +
                              kRestoreHint);
      r.leaves_[path] = (*strings)[name].get<std::string>();
    } else if (type == "None") {
      r.leaves_[path] = MsgpackNil{};
    } else if (type == "Dict" || type == "List" || type == "Tuple" || type == "NamedTuple") {
      r.leaves_[path] = EmptyDict{};
    } else {
      throw CheckpointError(where + ": value type '" + type +
                            "' is not one t5x saves (jax.Array, np.ndarray, scalar, string, None, empty containers)");
    }
  }
  // An array in the store that the tree does not name would be dropped
  // silently (a restore then blames the optimizer for the missing leaf).
  constexpr std::string_view kZarray = "/.zarray";
  for (const auto& key : r.ocdbt_->keys())
    if (key.ends_with(kZarray) && !listed.count(key.substr(0, key.size() - kZarray.size())))
      throw CheckpointError(meta_file + " does not list the array '" + key.substr(0, key.size() - kZarray.size()) +
                            "' that the OCDBT store holds: _METADATA is damaged or from another save" + kRestoreHint);
  return r;
}

namespace {
// An array of an Orbax checkpoint: its chunks are the store's values under
// `<name>/`. The .zarray is read again for what the spec does not keep (the
// fill value, the byte order).
HostTensor read_orbax_array(const OcdbtStore& store, const TensorStoreSpec& s, const IndexBox& box, int num_threads) {
  const std::string key = s.path + "/.zarray";
  auto zarray = store.read(key);
  if (!zarray) throw CheckpointError(store.dir() + ": the OCDBT store has no key '" + key + "'" + kRestoreHint);
  const ZarrMetadata m = ZarrMetadata::from_json(std::string(zarray->begin(), zarray->end()), store.dir() + ": " + key);
  if (m.shape != s.shape || m.dtype != s.dtype)
    throw CheckpointError(store.dir() + ": '" + key + "' changed since the checkpoint was opened" + kRestoreHint);
  return zarr_read_box([&](const std::string& key) { return store.read(s.path + "/" + key); },
                       store.dir() + ": " + s.path, m, box, num_threads);
}
}  // namespace

CheckpointReader CheckpointReader::open(const std::string& path) {
  CheckpointReader r;
  if (auto prefix = tf::tf_checkpoint_prefix(path)) {
    // A TensorFlow (Mesh-TF T5) checkpoint prefix, or a directory whose TF
    // `checkpoint` state file names one: read whole and mapped to t5x paths,
    // as t5x's RestoreCheckpointConfig does (checkpoint_importer.py).
    r.dir_ = *prefix;
    r.version_ = 3;
    for (auto& [p, t] : import_meshtf(tf::TfBundleReader::open(*prefix)).leaves) r.leaves_.emplace(p, std::move(t));
    return r;
  }
  if (fileio::is_dir(path) && is_orbax_checkpoint(path)) return open_orbax(path);  // says what is missing
  std::string file;
  if (fileio::is_dir(path)) {
    r.dir_ = path;
    if (fileio::is_dir(fileio::join(path, "state")) &&
        fileio::exists(fileio::join(fileio::join(path, "state"), kMsgpackName)))
      r.dir_ = fileio::join(path, "state");
    file = fileio::join(r.dir_, kMsgpackName);
  } else {
    file = path;
    r.dir_ = fs::path(path).parent_path().string();
  }
  auto bytes = fileio::read_file_if_exists(file);
  if (!bytes)
    throw CheckpointError("not a complete t5x checkpoint: '" + file +
                          "' is missing (the msgpack is written last, so the save did not finish)");
  auto [manifest, root] = check_msgpack_against_manifest(path, file, *bytes);
  if (manifest) r.manifest_ = std::make_shared<const CheckpointManifest>(std::move(*manifest));
  r.manifest_root_ = root;
  DecodedCheckpoint d = decode_checkpoint_msgpack(*bytes, file);
  if (d.version != 0 && d.version < 2)
    throw CheckpointError(file + ": checkpoint version " + std::to_string(d.version) +
                          " is too old (t5x restores versions >= 2)");
  r.version_ = d.version;
  r.leaves_ = std::move(d.leaves);
  return r;
}

std::vector<std::string> CheckpointReader::array_paths() const {
  std::vector<std::string> out;
  for (const auto& [p, l] : leaves_)
    if (std::holds_alternative<HostTensor>(l) || std::holds_alternative<TensorStoreSpec>(l))
      out.push_back(p);
  return out;
}

CheckpointReader::LeafInfo CheckpointReader::info(const std::string& path) const {
  auto it = leaves_.find(path);
  if (it == leaves_.end())
    throw CheckpointError("'" + path + "' is not in checkpoint '" + dir_ + "'");
  if (auto* t = std::get_if<HostTensor>(&it->second)) return {t->dtype, t->shape, false};
  if (auto* s = std::get_if<TensorStoreSpec>(&it->second)) {
    if (s->kvstore_driver == "ocdbt") return {s->dtype, s->shape, true};  // from the store's .zarray
    // The .zarray is authoritative (older specs may lack metadata).
    const std::string adir = fileio::join(dir_, s->path);
    if (fileio::exists(fileio::join(adir, ".zarray"))) {
      ZarrMetadata m = zarr_read_metadata(adir);
      return {m.dtype, m.shape, true};
    }
    return {s->dtype, s->shape, true};
  }
  throw CheckpointError("'" + path + "' in checkpoint '" + dir_ + "' is not an array");
}

std::optional<int64_t> CheckpointReader::step() const {
  auto it = leaves_.find("state/step");
  if (it == leaves_.end()) return std::nullopt;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  const HostTensor* t = std::get_if<HostTensor>(&it->second);
  HostTensor stored;  // Orbax keeps the step as a rank-0 array in its store
  if (auto* s = std::get_if<TensorStoreSpec>(&it->second); s && s->kvstore_driver == "ocdbt" && s->shape.empty())
    t = &(stored = read("state/step"));
  if (t) {
    if (t->numel() != 1) return std::nullopt;
    if (t->dtype == "int32") return t->values<int32_t>()[0];
    if (t->dtype == "int64") return t->values<int64_t>()[0];
    if (t->dtype == "uint32") return t->values<uint32_t>()[0];
  }
  return std::nullopt;
}

HostTensor CheckpointReader::read(const std::string& path, const std::optional<IndexBox>& box,
                                  std::string_view cast_to, int num_threads) const {
  auto it = leaves_.find(path);
  if (it == leaves_.end())
    throw CheckpointError("'" + path + "' is not in checkpoint '" + dir_ + "'");
  HostTensor out;
  if (auto* t = std::get_if<HostTensor>(&it->second)) {
    if (!box) {
      out = *t;
    } else {
      IndexBox b = *box;
      out = HostTensor::zeros(t->dtype, b.extent());
      bool bad = b.start.size() != t->shape.size() || b.stop.size() != t->shape.size();
      for (size_t i = 0; !bad && i < b.start.size(); ++i)
        bad = b.start[i] < 0 || b.stop[i] > t->shape[i] || b.start[i] > b.stop[i];
      if (bad)
          throw std::invalid_argument("[CheckpointReader::read] box " + b.to_string() +
                                      " outside '" + path + "' " + t->shape_string());
      copy_box(t->data.data(), IndexBox::full(t->shape), out.data.data(), b, dtype_itemsize(t->dtype));
    }
  } else if (auto* s = std::get_if<TensorStoreSpec>(&it->second); s && s->kvstore_driver == "ocdbt") {
    out = read_orbax_array(*ocdbt_, *s, box ? *box : IndexBox::full(s->shape), num_threads);
  } else if (s) {
    const std::string adir = fileio::join(dir_, s->path);
    // The files the manifest lists are read only as it records them.
    const std::string rel = manifest_ ? fs::path(adir).lexically_relative(manifest_root_).generic_string() + "/" : "";
    auto check = [&](const std::string& name, const std::vector<uint8_t>* bytes) {
      auto e = manifest_->files.find(rel + name);
      if (e == manifest_->files.end()) return;  // not listed: the structure checks alone
      const std::string file = fileio::join(adir, name);
      if (!bytes) throw CheckpointError(file + " is missing (listed in " + kManifestFile + ")" + kRestoreHint);
      if (auto bad = digest_mismatch(file, FileDigest::of(*bytes), e->second)) throw CheckpointError(*bad + kRestoreHint);
    };
    // With a manifest the .zarray's bytes are checked, then parsed: read once.
    std::optional<std::vector<uint8_t>> zarray;
    if (manifest_) {
      zarray = fileio::read_file_if_exists(fileio::join(adir, ".zarray"));
      check(".zarray", zarray ? &*zarray : nullptr);
    }
    ZarrMetadata m = zarray ? ZarrMetadata::from_json(std::string(zarray->begin(), zarray->end()),
                                                      fileio::join(adir, ".zarray"))
                            : zarr_read_metadata(adir);
    if (!s->shape.empty() && s->shape != m.shape)
      throw CheckpointError(adir + "/.zarray: shape does not match the msgpack spec of '" + path + "'");
    if (auto bad = spec_mismatch(*s, m, adir, path)) throw CheckpointError(*bad + kRestoreHint);
    out = zarr_read_box(adir, m, box ? *box : IndexBox::full(m.shape), num_threads,
                        manifest_ ? ZarrChunkCheck(check) : ZarrChunkCheck());
  } else {
    throw CheckpointError("'" + path + "' in checkpoint '" + dir_ + "' is not an array");
  }
  if (!cast_to.empty() && cast_to != out.dtype) out = cast_host_tensor(out, cast_to);
  return out;
}

HostTensor CheckpointReader::read_expect(const std::string& path,
                                         const std::vector<int64_t>& expected,
                                         const std::optional<IndexBox>& box,
                                         std::string_view cast_to, int num_threads) const {
  LeafInfo li = info(path);
  if (li.shape != expected) {
    HostTensor a, b;
    a.shape = li.shape;
    b.shape = expected;
    throw CheckpointError("Shape of `" + path + "` in checkpoint " + a.shape_string() +
                          " does not match expected " + b.shape_string() + " (checkpoint '" +
                          dir_ + "')");
  }
  return read(path, box, cast_to, num_threads);
}

std::optional<std::string> CheckpointReader::dataset_state(int process_index, int process_count) const {
  auto b = fileio::read_file_if_exists(
      fileio::join(dir_, dataset_state_file_name(process_index, process_count)));
  if (!b) return std::nullopt;
  return std::string(b->begin(), b->end());
}

// ---------------------------------------------------------------- scanning

std::vector<int64_t> all_steps(const std::string& model_dir, const std::string& prefix) {
  const std::regex re(regex_escape(prefix) + R"(_(\d+)$)");
  std::vector<int64_t> steps;
  for (const auto& name : list_names(model_dir)) {
    std::smatch m;
    if (!std::regex_match(name, m, re) || !fileio::is_dir(fileio::join(model_dir, name))) continue;
    int64_t step = 0;
    const std::string digits = m[1].str();
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (ec != std::errc() || end != digits.data() + digits.size())
      throw CheckpointError(fileio::join(model_dir, name) + ": the step " + digits +
                            " does not fit in int64\n  hint: rename or remove this directory");
    steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<int64_t> latest_step(const std::string& model_dir, const std::string& prefix) {
  auto steps = all_steps(model_dir, prefix);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (const std::string d = checkpoint_dir_for_step(model_dir, *it, prefix);
        fileio::exists(fileio::join(d, kMsgpackName)) || is_orbax_checkpoint(d))
      return *it;
  return std::nullopt;
}

std::vector<std::string> list_temp_dirs(const std::string& model_dir, const std::string& prefix) {
  const std::regex re(regex_escape(prefix) + R"(_\d+\.tmp-\d+$)");
  std::vector<std::string> out;
  for (const auto& name : list_names(model_dir))
    if (std::regex_match(name, re)) out.push_back(fileio::join(model_dir, name));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> remove_temp_dirs(const std::string& model_dir, const std::string& prefix) {
  auto dirs = list_temp_dirs(model_dir, prefix);
  for (const auto& d : dirs) fileio::remove_all(d);
  return dirs;
}

namespace {
// Every chunk of an Orbax array is in the store (t5x's fill_value is null),
// with a plausible size; kChecksums and kDecode decode them.
std::optional<std::string> validate_orbax_array(const OcdbtStore& store, const TensorStoreSpec& s,
                                                const std::string& path, Verify level, int num_threads) {
  auto zarray = store.read(s.path + "/.zarray");
  if (!zarray) return store.dir() + ": no '" + s.path + "/.zarray' for '" + path + "'";
  ZarrMetadata m =
      ZarrMetadata::from_json(std::string(zarray->begin(), zarray->end()), store.dir() + ": " + s.path + "/.zarray");
  for (const auto& chunk : m.chunk_keys()) {
    const std::string key = s.path + "/" + chunk;
    if (!store.has(key)) {
      if (m.fill_value) continue;  // TensorStore may omit chunks equal to a numeric fill value
      return store.dir() + ": missing chunk '" + key + "' of '" + path + "'";
    }
    if (level == Verify::kSizes) {
      auto bytes = store.read(key);
      std::string why = quick_check_chunk(m.compressor, *bytes, m.chunk_nbytes());
      if (!why.empty()) return store.dir() + ": damaged chunk '" + key + "': " + why;
    }
  }
  if (level != Verify::kSizes) read_orbax_array(store, s, IndexBox::full(m.shape), num_threads);
  return std::nullopt;
}
}  // namespace

std::optional<std::string> validate_checkpoint(const std::string& ckpt_dir, Verify level, int num_threads) {
  try {
    // Without the msgpack the save did not finish: CheckpointReader::open says so.
    std::optional<CheckpointManifest> manifest;
    if (fileio::exists(fileio::join(ckpt_dir, kMsgpackName)) && (manifest = read_manifest(ckpt_dir)))
      if (auto bad = verify_manifest(ckpt_dir, *manifest, level, num_threads)) return bad;
    CheckpointReader r = CheckpointReader::open(ckpt_dir);
    // A save names its directory by its step: a checkpoint_<N> holding
    // another step was renamed or altered (resuming it skips or repeats steps).
    {
      static const std::regex named(R"(checkpoint_(\d{1,18}))");
      std::smatch sm;
      const std::string name = fs::path(ckpt_dir).filename().string();
      if (std::regex_match(name, sm, named) && r.step() && *r.step() != std::stoll(sm[1].str()))
        return ckpt_dir + " holds step " + std::to_string(*r.step()) + ", not the step of its name";
    }
    for (const auto& [path, leaf] : r.leaves()) {
      const auto* s = std::get_if<TensorStoreSpec>(&leaf);
      if (!s) continue;
      if (s->kvstore_driver == "ocdbt") {
        // Orbax: the store's nodes were checked (CRC-32C) when it opened; its
        // values carry no checksum of their own beyond their codec's.
        if (auto bad = validate_orbax_array(*r.orbax_store(), *s, path, level, num_threads)) return bad;
        continue;
      }
      const std::string adir = fileio::join(r.dir(), s->path);
      if (manifest && !manifest->files.count(s->path + "/.zarray") && fileio::exists(fileio::join(adir, ".zarray")))
        return adir + "/.zarray is not listed in " + kManifestFile +
               " (the manifest was edited, or the file added after the save)";
      ZarrMetadata m = zarr_read_metadata(adir);
      if (!s->shape.empty() && m.shape != s->shape)
        return adir + "/.zarray: shape differs from the msgpack spec of '" + path + "'";
      if (auto bad = spec_mismatch(*s, m, adir, path)) return *bad;
      // Without a manifest the only checksums are the chunks' own (gzip's
      // CRC-32, zlib's Adler-32): checking them means decoding.
      const bool decode = level == Verify::kDecode || (level == Verify::kChecksums && !manifest);
      for (const auto& key : m.chunk_keys()) {
        // Listed in the manifest: its size (and CRC) were checked above.
        if (manifest && manifest->files.count(s->path + "/" + key)) continue;
        const std::string cf = fileio::join(adir, key);
        // A t5x.cpp manifest lists every file of the save: one it leaves out
        // would be read unchecked.
        if (manifest && fileio::exists(cf))
          return cf + " is not listed in " + kManifestFile +
                 " (the manifest was edited, or the file added after the save)";
        // Decoding reads a missing chunk as fill values, so its presence is
        // checked here at every level; the decode below checks the bytes.
        if (decode) {
          if (!m.fill_value && !fileio::exists(cf)) return "missing chunk '" + cf + "' of '" + path + "'";
          continue;
        }
        auto bytes = fileio::read_file_if_exists(cf);
        if (!bytes) {
          // With a numeric fill_value TensorStore may omit chunks equal to it;
          // t5x's fill_value null means every chunk was written.
          if (m.fill_value) continue;
          return "missing chunk '" + cf + "' of '" + path + "'";
        }
        std::string why = quick_check_chunk(m.compressor, *bytes, m.chunk_nbytes());
        if (!why.empty()) return "damaged chunk '" + cf + "': " + why;
      }
      if (decode) zarr_read_box(adir, m, IndexBox::full(m.shape), num_threads);
    }
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::string move_damaged_aside(const std::string& ckpt_dir) {
  std::string dir = ckpt_dir;
  while (!dir.empty() && dir.back() == '/') dir.pop_back();
  const std::string base = dir + ".damaged-" + std::to_string(int64_t(std::time(nullptr)));
  std::string to = base;
  for (int k = 2; fileio::exists(to); ++k) to = base + "-" + std::to_string(k);
  std::error_code ec;
  fs::rename(dir, to, ec);
  if (ec)
    throw CheckpointError("cannot move the damaged checkpoint '" + dir + "' aside to '" + to + "': " + ec.message() +
                          "\n  hint: move or delete it by hand; while it is there its step is never saved again");
  return to;
}

std::string StepScan::report() const {
  std::string s;
  for (const auto& [dir, why] : skipped) s += "skipped " + dir + ": " + why + "\n";
  for (const auto& [dir, to] : moved)
    s += "moved " + dir + " aside to " + to + " so that its step is saved again (delete it once it is not needed)\n";
  if (!skipped.empty())
    s += step ? "resuming from step " + std::to_string(*step) + "\n" : "no complete checkpoint found\n";
  return s;
}

StepScan latest_valid_step(const std::string& model_dir, const ScanOptions& opt, const std::string& prefix) {
  StepScan scan;
  for (const auto& t : list_temp_dirs(model_dir, prefix))
    scan.skipped.push_back({t, "half-written temporary directory of an interrupted save (ignored)"});
  // Steps newest first; a non-directory named like a step (a stray file) is
  // no save, but its name would make the save of its step a no-op: it is
  // moved aside like a damaged checkpoint, so that the step is saved again.
  std::vector<std::pair<int64_t, std::string>> entries;  // (step, non-directory path or "")
  for (int64_t s : all_steps(model_dir, prefix)) entries.push_back({s, ""});
  const std::regex re(regex_escape(prefix) + R"(_(\d{1,18})$)");
  for (const auto& name : list_names(model_dir)) {
    std::smatch m;
    if (!std::regex_match(name, m, re)) continue;
    const int64_t s = std::stoll(m[1].str());
    const std::string p = checkpoint_dir_for_step(model_dir, s, prefix);
    if (p == fileio::join(model_dir, name) && !fileio::is_dir(p)) entries.push_back({s, p});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [step, non_dir] : entries) {
    if (!non_dir.empty()) {
      scan.skipped.push_back({non_dir, non_dir + " is a file, not a checkpoint directory"});
      if (opt.move_damaged_aside) scan.moved.push_back({non_dir, move_damaged_aside(non_dir)});
      continue;
    }
    const std::string d = checkpoint_dir_for_step(model_dir, step, prefix);
    if (auto err = validate_checkpoint(d, opt.verify, opt.num_threads)) {
      scan.skipped.push_back({d, *err});
      // An Orbax checkpoint is another format, not damage: left where it is.
      if (opt.move_damaged_aside && !is_orbax_checkpoint(d)) scan.moved.push_back({d, move_damaged_aside(d)});
      continue;
    }
    scan.step = step;
    break;
  }
  return scan;
}

bool is_pinned(const std::string& ckpt_dir) {
  return fileio::exists(fileio::join(ckpt_dir, "PINNED"));
}

void pin_checkpoint(const std::string& ckpt_dir) {
  fileio::write_text(fileio::join(ckpt_dir, "PINNED"), "", true);
}

std::vector<int64_t> apply_retention(const std::string& model_dir, int keep, const std::string& prefix) {
  std::vector<int64_t> removed;
  if (keep <= 0) return removed;
  auto steps = all_steps(model_dir, prefix);
  if (int(steps.size()) <= keep) return removed;
  for (size_t i = 0; i + size_t(keep) < steps.size(); ++i) {
    const std::string d = checkpoint_dir_for_step(model_dir, steps[i], prefix);
    if (is_pinned(d)) continue;
    // Renamed to a temporary name first (atomic): an interrupted removal then
    // leaves a directory the next start removes (remove_temp_dirs), never a
    // half-deleted checkpoint_N.
    const std::string doomed = d + ".tmp-" + std::to_string(std::time(nullptr));
    std::error_code ec;
    fs::rename(d, doomed, ec);
    fileio::remove_all(ec ? d : doomed);
    removed.push_back(steps[i]);
  }
  return removed;
}

namespace {
// Locks this process holds: path -> (fd, holders).
std::mutex g_dir_locks_mu;
std::map<std::string, std::pair<int, int>>& dir_locks() {
  static std::map<std::string, std::pair<int, int>> m;
  return m;
}
}  // namespace

ModelDirLock::ModelDirLock(const std::string& model_dir, int rank, double wait_s,
                           const std::function<void(const std::string&)>& on_wait)
    : path_(fileio::join(model_dir, ".lock-process-" + std::to_string(rank))) {
  std::lock_guard<std::mutex> g(g_dir_locks_mu);
  if (auto it = dir_locks().find(path_); it != dir_locks().end()) {
    ++it->second.second;
    return;
  }
  fileio::make_dirs(model_dir);
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw CheckpointError(path_ + ": cannot open the run's lock file: " + std::strerror(errno) +
                          "\n  hint: MODEL_DIR must be a writable directory");
  const auto t0 = std::chrono::steady_clock::now();
  bool told = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int e = errno;
      ::close(fd);
      throw CheckpointError(path_ + ": cannot lock: " + std::strerror(e));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited >= wait_s) {
      ::close(fd);
      throw CheckpointError(model_dir + " is in use by another training run (process " + std::to_string(rank) +
                            " of it holds " + path_ + ")\n  hint: wait for that run to end, or train into another "
                            "MODEL_DIR");
    }
    if (!told && on_wait) {
      on_wait("waiting for " + model_dir + ": another training run holds it (" + path_ + ")");
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  dir_locks()[path_] = {fd, 1};
}

ModelDirLock::~ModelDirLock() {
  std::lock_guard<std::mutex> g(g_dir_locks_mu);
  auto it = dir_locks().find(path_);
  if (it == dir_locks().end() || --it->second.second > 0) return;
  ::close(it->second.first);  // releases the flock
  dir_locks().erase(it);
}

}  // namespace t5x
