#include "t5x/checkpoints/inspect.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/zarr.h"

namespace t5x {

namespace fs = std::filesystem;

namespace {

// A checkpoint directory of either format t5x writes: its msgpack, or Orbax's store.
bool holds_checkpoint(const std::string& dir) {
  return fileio::exists(fileio::join(dir, "checkpoint")) || fileio::exists(fileio::join(dir, "state/checkpoint")) ||
         is_orbax_checkpoint(dir);
}

std::string with_commas(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(b);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string named_shape(const ArrayInfo& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.shape.size(); ++i) {
    if (i) s += ", ";
    if (a.logical_axes.size() == a.shape.size()) s += a.logical_axes[i] + "=";
    s += std::to_string(a.shape[i]);
  }
  if (a.shape.size() == 1 && a.logical_axes.empty()) s += ",";
  return s + ")";
}

std::string scalar_text(const CheckpointLeaf& l) {
  if (auto* i = std::get_if<int64_t>(&l)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&l)) { std::ostringstream o; o << *d; return o.str(); }
  if (auto* b = std::get_if<bool>(&l)) return *b ? "true" : "false";
  if (auto* s = std::get_if<std::string>(&l)) return "'" + *s + "'";
  if (std::holds_alternative<MsgpackNil>(l)) return "None";
  return "{}";
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) n += e.file_size(ec);
  return n;
}

}  // namespace

std::string resolve_checkpoint_path(const std::string& path, std::string* note, Verify verify) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw CheckpointError(path + ": no such file or directory\n  hint: give a checkpoint_<step> directory or a MODEL_DIR");
  if (fs::is_regular_file(path, ec)) {
    if (fs::path(path).filename() == "checkpoint") return fs::path(path).parent_path().string();
    throw CheckpointError(path + ": not a checkpoint directory or `checkpoint` msgpack file\n"
                          "  hint: give a checkpoint_<step> directory or a MODEL_DIR");
  }
  if (holds_checkpoint(path)) return path;
  if (!all_steps(path).empty() || !list_temp_dirs(path).empty()) {
    StepScan scan = latest_valid_step(path, {.verify = verify});
    if (note) *note = scan.report();
    if (!scan.step)
      throw CheckpointError(path + ": no complete checkpoint_<step> directory\n" + scan.report() +
                            "  hint: every save in this MODEL_DIR is damaged or unfinished; restore from a backup");
    return checkpoint_dir_for_step(path, *scan.step);
  }
  if (fs::path(path).filename().string().rfind("checkpoint_", 0) == 0)
    throw CheckpointError(path + ": not a complete t5x checkpoint (the `checkpoint` msgpack file is missing)\n"
                          "  hint: the save did not finish; use an earlier step");
  throw CheckpointError(path + ": neither a checkpoint directory nor a MODEL_DIR with checkpoint_<step> directories");
}

std::map<std::string, std::vector<std::string>> read_model_info_axes(const std::string& path) {
  std::map<std::string, std::vector<std::string>> out;
  std::ifstream f(path);
  if (!f) return out;
  // "Variable NAME size N shape (AXIS=N, ...)", split by hand: libstdc++'s
  // std::regex recurses per character and overflowed the stack on a long line.
  for (std::string line; std::getline(f, line);) {
    std::istringstream words(line);
    std::string variable, name, size, n, shape;
    if (line.rfind("Variable", 0) != 0 || !(words >> variable >> name >> size >> n >> shape) ||
        variable != "Variable" || size != "size" || shape != "shape" ||
        !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::string rest;
    std::getline(words, rest);
    const size_t open = rest.find_first_not_of(" \t"), close = rest.find(')');
    if (open == std::string::npos || rest[open] != '(' || close == std::string::npos || close < open) continue;
    std::vector<std::string> axes;
    std::stringstream dims(rest.substr(open + 1, close - open - 1));
    bool named = true;
    for (std::string d; std::getline(dims, d, ',');) {
      d.erase(0, d.find_first_not_of(' '));
      d.erase(d.find_last_not_of(' ') + 1);
      if (d.empty()) continue;
      auto eq = d.find('=');
      if (eq == std::string::npos) { named = false; break; }
      axes.push_back(d.substr(0, eq));
    }
    if (named) out[name] = std::move(axes);
  }
  return out;
}

uint64_t tensor_digest(const HostTensor& t) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) { h ^= b[i]; h *= 0x100000001b3ull; }
  };
  mix(t.dtype.data(), t.dtype.size());
  for (int64_t d : t.shape) mix(&d, sizeof d);
  mix(t.data.data(), t.data.size());
  return h;
}

std::string digest_hex(uint64_t d) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(d));
  return buf;
}

CheckpointInventory inspect_checkpoint(const std::string& path, const InspectOptions& opt) {
  CheckpointInventory inv;
  inv.dir = resolve_checkpoint_path(path, &inv.note, opt.verify.value_or(Verify::kSizes));
  if (opt.verify) {
    // A MODEL_DIR's choice passed these checks in resolve_checkpoint_path; a
    // checkpoint named directly is held to the same.
    std::error_code ec;
    if (holds_checkpoint(path) || fs::is_regular_file(path, ec))
      if (auto bad = validate_checkpoint(inv.dir, *opt.verify, opt.num_threads)) {
        // An Orbax step may be whole but in a layout t5x.cpp does not read;
        // the trainer leaves such steps (t5x's) where they are.
        if (is_orbax_checkpoint(inv.dir))
          throw CheckpointError(inv.dir + " (Orbax) cannot be read: " + *bad +
                                "\n  hint: use another step (`t5x ckpt info MODEL_DIR` names the newest readable "
                                "one; `t5x train` skips this one and leaves it in place)");
        throw CheckpointError(inv.dir + " is damaged: " + *bad +
                              "\n  hint: use an earlier step (`t5x ckpt info MODEL_DIR` names the newest complete "
                              "one; `t5x train` moves a damaged newest step aside and saves it again)");
      }
    std::optional<CheckpointManifest> m;
    try {
      m = read_manifest(inv.dir);
    } catch (const CheckpointError&) {
      // Unreadable: validate_checkpoint above has already refused it.
    }
    const char* what = *opt.verify == Verify::kSizes       ? "sizes"
                       : *opt.verify == Verify::kChecksums ? "sizes and crc32c"
                                                           : "sizes and crc32c, chunks decoded";
    if (is_orbax_checkpoint(inv.dir))
      inv.verified = std::string("verified: the OCDBT store's manifest and nodes (CRC-32C), every array's chunks ") +
                     (*opt.verify == Verify::kSizes ? "present and complete" : "present and decoded") +
                     " (OCDBT keeps no checksum of the values themselves)";
    else
      inv.verified =
          m ? "verified: " + std::to_string(m->files.size()) + " files match " + kManifestFile + " (" + what + ")"
            : std::string("verified: structure and chunk sizes (no ") + kManifestFile +
                  ": written by t5x or an older t5x.cpp, so no checksums)" +
                  (*opt.verify == Verify::kDecode ? ", chunks decoded" : "");
  }
  CheckpointReader r = CheckpointReader::open(inv.dir);
  inv.version = r.version();
  if (const OcdbtStore* store = r.orbax_store())
    inv.format = "Orbax (OCDBT store, generation " + std::to_string(store->generation()) + ", " +
                 std::to_string(store->size()) + " keys; zarr v2 arrays)";
  inv.step = r.step();
  const auto axes = read_model_info_axes((fs::path(inv.dir).parent_path() / "model-info.txt").string());
  for (const auto& p : r.array_paths()) {
    ArrayInfo a;
    a.path = p;
    auto li = r.info(p);
    a.dtype = li.dtype;
    a.shape = li.shape;
    a.numel = 1;
    for (int64_t d : a.shape) a.numel *= d;
    a.nbytes = uint64_t(a.numel) * dtype_itemsize(a.dtype);
    const auto& leaf = r.leaves().at(p);
    if (const auto* spec = std::get_if<TensorStoreSpec>(&leaf)) {
      a.storage = "zarr/" + (spec->compressor.id.empty() ? std::string("raw") : spec->compressor.id);
      if (spec->kvstore_driver == "ocdbt") {
        a.storage = "ocdbt/" + a.storage;
        a.disk_bytes = r.orbax_store()->value_bytes(spec->path + "/");
      } else {
        a.disk_bytes = dir_bytes(fileio::join(r.dir(), spec->path));
      }
    } else {
      a.storage = "inline";
    }
    if (p.rfind("target/", 0) == 0) {
      auto it = axes.find(p.substr(7));
      if (it != axes.end() && it->second.size() == a.shape.size()) a.logical_axes = it->second;
    }
    if (opt.digest) a.digest = tensor_digest(r.read(p, std::nullopt, "", opt.num_threads));
    inv.arrays.push_back(std::move(a));
  }
  std::stable_sort(inv.arrays.begin(), inv.arrays.end(), [](const ArrayInfo& x, const ArrayInfo& y) {
    const bool tx = x.path.rfind("target/", 0) == 0, ty = y.path.rfind("target/", 0) == 0;
    if (tx != ty) return tx;
    return x.path < y.path;
  });
  for (const auto& [p, leaf] : r.leaves())
    if (!std::holds_alternative<HostTensor>(leaf) && !std::holds_alternative<TensorStoreSpec>(leaf))
      inv.scalars[p] = scalar_text(leaf);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(inv.dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("train_ds-", 0) == 0 && n.ends_with(".json")) inv.dataset_states.push_back(n);
  }
  std::sort(inv.dataset_states.begin(), inv.dataset_states.end());
  return inv;
}

std::string format_inventory(const CheckpointInventory& inv) {
  std::ostringstream o;
  if (!inv.note.empty()) o << inv.note;
  o << "checkpoint " << inv.dir << "\n";
  if (inv.format.empty()) o << "  format version " << inv.version;
  else o << "  format " << inv.format;
  if (inv.step) o << ", step " << *inv.step;
  o << "\n";
  if (!inv.verified.empty()) o << "  " << inv.verified << "\n";
  size_t w_path = 4, w_dtype = 5, w_shape = 5;
  std::vector<std::string> shapes;
  for (const auto& a : inv.arrays) {
    shapes.push_back(named_shape(a));
    w_path = std::max(w_path, a.path.size());
    w_dtype = std::max(w_dtype, a.dtype.size());
    w_shape = std::max(w_shape, shapes.back().size());
  }
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  const bool digests = !inv.arrays.empty() && inv.arrays.front().digest.has_value();
  o << pad("path", w_path) << "  " << pad("dtype", w_dtype) << "  " << pad("shape", w_shape)
    << "  " << pad("elements", 12) << "  " << pad("bytes", 10) << "  storage" << (digests ? "       digest" : "") << "\n";
  uint64_t param_n = 0, param_b = 0, state_n = 0, state_b = 0, disk = 0;
  for (size_t i = 0; i < inv.arrays.size(); ++i) {
    const auto& a = inv.arrays[i];
    o << pad(a.path, w_path) << "  " << pad(a.dtype, w_dtype) << "  " << pad(shapes[i], w_shape) << "  "
      << pad(with_commas(uint64_t(a.numel)), 12) << "  " << pad(human_bytes(a.nbytes), 10) << "  "
      << pad(a.storage, 12);
    if (a.digest) o << "  " << digest_hex(*a.digest);
    o << "\n";
    const bool param = a.path.rfind("target/", 0) == 0;
    (param ? param_n : state_n) += uint64_t(a.numel);
    (param ? param_b : state_b) += a.nbytes;
    disk += a.disk_bytes;
  }
  for (const auto& [p, v] : inv.scalars) o << p << " = " << v << "\n";
  o << "parameters: " << with_commas(param_n) << " (" << human_bytes(param_b) << ")\n";
  o << "optimizer state and step: " << with_commas(state_n) << " (" << human_bytes(state_b) << ")\n";
  o << "arrays: " << inv.arrays.size() << ", zarr on disk: " << human_bytes(disk) << "\n";
  if (!inv.dataset_states.empty()) {
    o << "data positions:";
    for (const auto& d : inv.dataset_states) o << " " << d;
    o << "\n";
  }
  return o.str();
}

std::string format_digests(const CheckpointInventory& inv) {
  std::vector<const ArrayInfo*> v;
  for (const auto& a : inv.arrays) v.push_back(&a);
  std::sort(v.begin(), v.end(), [](auto* x, auto* y) { return x->path < y->path; });
  std::ostringstream o;
  for (const auto* a : v) {
    o << a->path << " " << a->dtype << " (";
    for (size_t i = 0; i < a->shape.size(); ++i) o << (i ? "," : "") << a->shape[i];
    o << ") " << (a->digest ? digest_hex(*a->digest) : std::string("-")) << "\n";
  }
  return o.str();
}

}  // namespace t5x
