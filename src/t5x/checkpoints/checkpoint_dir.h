// Checkpoint directories of t5x's legacy native format (t5x.md §3.1-3.2):
// atomic multi-process save, restore of any slice, step listing, retention
// with PINNED, and detection of half-written or damaged checkpoints.
//
//   MODEL_DIR/checkpoint_<step>/            (step not zero-padded)
//     checkpoint                            msgpack, written last by process 0
//     target.encoder.layers_0....kernel/    one zarr v2 array per partitioned leaf
//     train_ds-<p:03>-of-<n:03>.json        data-pipeline position per process (t5x.cpp)
//     manifest.t5xcpp.json                  size and CRC-32C of every file above (t5x.cpp, manifest.h)
//     PINNED                                optional: exempt from retention
//
// Save protocol (t5x Checkpointer.save): write into
// `checkpoint_<step>.tmp-<timestamp>` (timestamp identical on all processes);
// each process notes the size and CRC of every file it writes (with several
// processes it leaves them in `manifest.t5xcpp.part-<p>-of-<n>.json`);
// barrier; process 0 writes the msgpack, then the manifest (every file in the
// directory, CRCs from the notes, files without a note read back), removes
// the notes, fsyncs, renames into place, applies retention; barrier. An
// existing final directory means the save is skipped. A save that throws
// (e.g. "No space left on device (ENOSPC)", naming the file) never touches
// the complete checkpoints; on one process it also removes its tmp directory.
// Kill points for the crash tests: fault_inject.h.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "t5x/checkpoints/manifest.h"
#include "t5x/checkpoints/msgpack_checkpoint.h"
#include "t5x/checkpoints/ocdbt.h"
#include "t5x/checkpoints/zarr.h"

namespace t5x {

// One leaf of the state to save, as seen by one process.
struct SaveLeaf {
  std::string path;        // "target/encoder/layers_0/attention/query/kernel", "state/step"
  HostTensor data;         // inline: the whole array; partitioned: this process's slice
  bool partitioned = false;            // false: inline in msgpack (t5x: mesh axes None)
  std::vector<int64_t> global_shape;   // partitioned only
  IndexBox box;                        // partitioned only: the global slice `data` holds
  bool write = true;                   // false for replica copies (replica_id != 0)
  std::vector<int64_t> chunks;         // partitioned; empty = box extent (per-shard chunks)
  std::optional<ZarrCompressor> compressor;  // overrides SaveOptions::compressor

  // An unpartitioned leaf written inline into the msgpack by process 0.
  static SaveLeaf inline_array(std::string path, HostTensor data) {
    SaveLeaf l;
    l.path = std::move(path);
    l.data = std::move(data);
    return l;
  }
  // A partitioned leaf: `slice` holds `box` of the global array.
  static SaveLeaf sharded(std::string path, HostTensor slice, std::vector<int64_t> global_shape,
                          IndexBox box, bool write = true) {
    SaveLeaf l;
    l.path = std::move(path);
    l.data = std::move(slice);
    l.partitioned = true;
    l.global_shape = std::move(global_shape);
    l.box = std::move(box);
    l.write = write;
    return l;
  }
  // A whole array written by one process as t5x writes a parameter: one zarr
  // array in t5x's chunks (zarr.h, t5x_chunk_shape). For the converters.
  static SaveLeaf whole(std::string path, HostTensor data);
};

struct SaveOptions {
  std::string prefix = "checkpoint";
  ZarrCompressor compressor{"gzip", 1};
  // t5x SaveCheckpointConfig.dtype: cast of "target/" float leaves ("" = keep).
  std::string save_dtype = "float32";
  int process_index = 0;
  int process_count = 1;
  // Global barrier across processes; tags name the phase. Empty = single process.
  std::function<void(const std::string& tag)> barrier;
  int64_t timestamp = -1;        // tmp-dir suffix; -1 = time(nullptr) (broadcast it yourself)
  bool durable = true;           // fsync files and directories
  int num_threads = 1;           // chunk encode/write threads per process
  std::optional<std::string> dataset_state_json;  // this process's pipeline position
  int keep = 0;                  // retention after the save: newest N (+PINNED); 0 = all
  // Test hook: stop right after the tensorstore phase (simulates a crash that
  // leaves the tmp dir behind without the msgpack).
  bool crash_before_msgpack = false;
};

struct SaveResult {
  std::string dir;               // final checkpoint directory
  bool skipped_existing = false; // it already existed: nothing was written
  uint64_t bytes_written = 0;    // by this process (chunk files + msgpack + sidecar)
  std::vector<int64_t> removed_steps;  // by retention (process 0)
};

// Throws std::invalid_argument "[save_checkpoint] ..." for inconsistent leaves
// and CheckpointError for I/O failures.
SaveResult save_checkpoint(const std::string& model_dir, int64_t step,
                           const std::vector<SaveLeaf>& leaves, const SaveOptions& opt = {});

// The converters' save (import-hf, import-tf): `leaves` plus an inline int32
// "state/step", written as they are (no dtype cast) to
// MODEL_DIR/checkpoint_<step>. Returns that directory; throws CheckpointError
// for a step outside [0, 2^31 - 1], when MODEL_DIR already holds a checkpoint
// (of any step, or a temporary one), model.gin or config.gin (nothing is
// written), or on I/O failures.
std::string save_converted_checkpoint(const std::string& model_dir, int64_t step, std::vector<SaveLeaf> leaves,
                                      const ZarrCompressor& compressor, bool durable);

std::string checkpoint_dir_for_step(const std::string& model_dir, int64_t step,
                                    const std::string& prefix = "checkpoint");
std::string dataset_state_file_name(int process_index, int process_count);

class CheckpointReader {
 public:
  // `path` is a checkpoint directory or its `checkpoint` file; a directory
  // with a `state/` subdirectory is read from `state/checkpoint`. Throws
  // CheckpointError when the msgpack is missing or corrupt. A TensorFlow
  // checkpoint prefix (PATH.index exists), or a directory whose TF `checkpoint`
  // state file names one (tf::tf_checkpoint_prefix), is read whole, its
  // Mesh-TF T5 names mapped to t5x paths (meshtf_mapping.h), and served as
  // inline arrays; dir() is then the prefix. An Orbax checkpoint (t5x's
  // default since `use_orbax = True`: `state/_METADATA` and an OCDBT store,
  // ocdbt.h) is read through its store: `_METADATA`'s tree gives the leaves
  // (key tuples joined with '/', as the msgpack's paths), each array is the
  // zarr v2 array `<'.'-joined name>/` inside the store (a TensorStoreSpec
  // with kvstore_driver "ocdbt"), strings come from `_strings.json`; dir() is
  // then the `state/` directory and version() is 0.
  static CheckpointReader open(const std::string& path);

  struct LeafInfo {
    std::string dtype;
    std::vector<int64_t> shape;
    bool in_tensorstore = false;
  };

  int version() const { return version_; }
  const std::string& dir() const { return dir_; }
  const FlatState& leaves() const { return leaves_; }
  std::vector<std::string> array_paths() const;        // inline arrays and specs
  bool has(const std::string& path) const { return leaves_.count(path) != 0; }
  LeafInfo info(const std::string& path) const;        // throws CheckpointError if absent
  std::optional<int64_t> step() const;                 // "state/step"

  // Reads `box` (default: whole array) of an array leaf; only the chunks that
  // intersect the box are read. `cast_to` ("float32"/"bfloat16"/"float16",
  // empty = none) converts floats after reading. With a manifest
  // (manifest.h), every file read that it lists (.zarray, chunks) must have
  // its recorded size and CRC-32C: a CheckpointError names the file
  // otherwise, so a restore never takes damaged bytes, whatever the verify
  // level of the scan before it. A .zarray whose dtype or chunks contradict
  // the msgpack spec is refused too.
  HostTensor read(const std::string& path, const std::optional<IndexBox>& box = std::nullopt,
                  std::string_view cast_to = "", int num_threads = 1) const;
  // As read(), but first refuses a global shape other than `expected_shape`:
  // "Shape of `<path>` in checkpoint (a, b) does not match expected (c, d)".
  HostTensor read_expect(const std::string& path, const std::vector<int64_t>& expected_shape,
                         const std::optional<IndexBox>& box = std::nullopt,
                         std::string_view cast_to = "", int num_threads = 1) const;

  std::optional<std::string> dataset_state(int process_index, int process_count) const;

  // The OCDBT store of an Orbax checkpoint; null for t5x's legacy format.
  const OcdbtStore* orbax_store() const { return ocdbt_.get(); }

 private:
  static CheckpointReader open_orbax(const std::string& state_dir);
  std::string dir_;
  int version_ = 0;
  FlatState leaves_;
  std::shared_ptr<const CheckpointManifest> manifest_;  // null: none (t5x's saves)
  std::string manifest_root_;                           // the directory its paths start at
  std::shared_ptr<const OcdbtStore> ocdbt_;             // Orbax checkpoints only
};

// Whether `dir` (a checkpoint_<N> directory or its `state/`) is an Orbax
// checkpoint: no msgpack, and one of Orbax's files (`_METADATA`,
// `manifest.ocdbt`, `_CHECKPOINT_METADATA`). Complete or not: opening one
// says what is missing. The scan skips a damaged one but never moves it aside.
bool is_orbax_checkpoint(const std::string& dir);

// ---- Directory scanning, validation and retention ----

// Steps of every `<prefix>_<N>` directory (regex `<prefix>_(\d+)$`), ascending.
std::vector<int64_t> all_steps(const std::string& model_dir, const std::string& prefix = "checkpoint");
// Newest step whose directory holds the msgpack file or an Orbax checkpoint
// (which Orbax renames into place when complete); nullopt if none.
std::optional<int64_t> latest_step(const std::string& model_dir, const std::string& prefix = "checkpoint");
// Leftover `<prefix>_<N>.tmp-<T>` directories of interrupted saves.
std::vector<std::string> list_temp_dirs(const std::string& model_dir, const std::string& prefix = "checkpoint");
// Removes them and returns the ones removed. Only for a MODEL_DIR in which no
// save is under way: the trainer calls it on process 0 before its first save
// (another process's save of the same run cannot have started yet).
std::vector<std::string> remove_temp_dirs(const std::string& model_dir, const std::string& prefix = "checkpoint");

// One training run per MODEL_DIR at a time. Process `rank` of a run holds an
// exclusive lock (flock) on MODEL_DIR/.lock-process-<rank> while the object
// lives; the kernel drops it when the process ends, however it ends. Two runs
// started into one directory raced each other's saves, and after `kill -9` of
// mpirun its ranks go on for a moment: a restart at once removed the
// temporary directory they were renaming. The constructor waits up to
// `wait_s` seconds for the lock (`on_wait` is told once), then throws
// CheckpointError naming the directory. Within one process the same lock may
// be taken again (tests run trainers one after another).
class ModelDirLock {
 public:
  ModelDirLock(const std::string& model_dir, int rank, double wait_s = 30.0,
               const std::function<void(const std::string&)>& on_wait = {});
  ~ModelDirLock();
  ModelDirLock(const ModelDirLock&) = delete;
  ModelDirLock& operator=(const ModelDirLock&) = delete;

 private:
  std::string path_;
};

// Checks one checkpoint directory; returns the problem (naming the file) or
// nullopt when the checkpoint is complete. Always: the msgpack exists and
// parses, every TensorStore leaf has a valid .zarray matching its spec, and
// every chunk file exists (when fill_value is null, as t5x writes it). With a
// manifest (manifest.h), first every listed file has its recorded size
// (Verify::kSizes) and CRC-32C (kChecksums, kDecode), and a listed chunk needs
// no more; a chunk the manifest does not list (a checkpoint without one) gets
// a plausible-size check (raw: exact; zstd: complete frame; gzip: the
// trailer's size field). kDecode also decodes every chunk.
std::optional<std::string> validate_checkpoint(const std::string& ckpt_dir, Verify level = Verify::kSizes,
                                               int num_threads = 1);

// Renames a damaged checkpoint directory to `<dir>.damaged-<unix time>` (a
// "-2", "-3" ... suffix if that exists): out of the step listing, so that its
// step is saved again, and kept for inspection. Returns the new path; throws
// CheckpointError when the rename fails.
std::string move_damaged_aside(const std::string& ckpt_dir);

struct ScanOptions {
  Verify verify = Verify::kSizes;
  // Move every damaged step newer than the one found aside
  // (move_damaged_aside); Orbax checkpoints (is_orbax_checkpoint) are skipped
  // but not moved. The trainer does this, on process 0 only.
  bool move_damaged_aside = false;
  int num_threads = 1;  // CRC threads
};

struct StepScan {
  std::optional<int64_t> step;                               // newest valid step
  std::vector<std::pair<std::string, std::string>> skipped;  // (directory, reason)
  std::vector<std::pair<std::string, std::string>> moved;    // (damaged directory, its new path)
  std::string report() const;  // human-readable lines, empty if nothing was skipped
};
// Newest complete checkpoint, skipping (and reporting) temp dirs, damaged
// checkpoints and files named like a step - the automatic-resume rule. Only
// the entries from the newest down to the first valid one are checked.
StepScan latest_valid_step(const std::string& model_dir, const ScanOptions& opt = {},
                           const std::string& prefix = "checkpoint");

bool is_pinned(const std::string& ckpt_dir);
void pin_checkpoint(const std::string& ckpt_dir);  // creates PINNED
// t5x _remove_old_checkpoints: all but the newest `keep` steps are deleted
// unless PINNED. Returns the removed steps. keep <= 0 keeps everything.
std::vector<int64_t> apply_retention(const std::string& model_dir, int keep,
                                     const std::string& prefix = "checkpoint");

}  // namespace t5x
