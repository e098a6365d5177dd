// The train state (parameters + optimizer state + step) and its checkpoints
// in t5x's legacy format (t5x.md 3.2; t5x/checkpoints/checkpoint_dir.h).
//
// Leaves follow t5x's TrainState.state_dict(): "target/<param path>",
// "state/step", "state/param_states/<slot>". A leaf with a partition spec
// (parameters, and slots shaped like their parameter: Adafactor v / m, Adam
// mu / nu) is written as a zarr array; replicated leaves (step, v_row,
// v_col, (1,)-placeholders, counters) go inline into the msgpack, as t5x
// decides by mesh axes None. A leaf that is whole on every process is
// written by process 0; a leaf split over the 'model' axis (Array sharding on
// the data replica's mesh, trainer/distributed.h) is written shard by shard:
// each shard by the one process of data replica 0 that holds it, as the
// global slice (IndexBox) it covers, so the zarr array on disk is the whole
// array whatever the mesh. Restore reads each process's own slice. Each
// process writes its own data-position file.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/array.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/param_layout.h"
#include "t5x/optim/optimizer.h"
#include "t5x/trainer/run_config.h"

namespace t5x::trainer {

struct TrainState {
  ParamTree params;
  OptimizerState opt;
  int64_t step() const { return opt.step; }
};

// The local shard of `a` (the whole array when it is not split).
HostTensor to_host(const Array& a);
// Copies `t` into an Array shaped and sharded like `like`: `t` holds like's
// local shard (the whole array when like is not split); dtype converted to like's.
Array from_host(const HostTensor& t, const Array& like);
// The global slice this process's shard of `a` covers (nullopt: not split).
std::optional<IndexBox> shard_box(const Array& a);

struct SaveContext {
  int process_index = 0;
  int process_count = 1;
  std::function<void(const std::string&)> barrier;  // empty: single process
  int64_t timestamp = -1;                           // identical on all processes
  int64_t data_replica = 0;  // this process's data coordinate: only replica 0 writes split leaves
  bool durable = true;                              // fsync files and directories
};

// The checkpoint layout of `model`'s parameters and, with `opt`, of their
// optimizer slots: the identity, but scalable_t5's for its network
// (T5Config::scalable_checkpoint; checkpoints/param_layout.h). Throws
// CheckpointError when the optimizer's slots cannot be stacked as t5x's.
ParamLayout checkpoint_layout(const BaseTransformerModel& model, const Optimizer* opt);

// `specs` as `layout` holds them in checkpoints (scalable_t5's stacked or
// split parameters; the same specs for the identity), for model-info.txt.
nn::ParamSpecs checkpoint_param_specs(const nn::ParamSpecs& specs, const ParamLayout& layout);

// Saves MODEL_DIR/checkpoint_<step> (atomic) with this process's data state
// JSON; applies retention (keep). The leaves are written in `layout`.
// Returns the directory.
std::string save_train_state(const std::string& model_dir, const TrainState& state, const SaveCheckpointConfig& cfg,
                             const std::optional<std::string>& data_state_json, const SaveContext& ctx,
                             const ParamLayout& layout = {});

struct RestoreResult {
  std::string dir;
  bool optimizer_restored = false;
  // With with_optimizer and optimizer_restored false: the checkpoint's own
  // optimizer state ("state/param_states/..." paths), when it holds some (an
  // other optimizer's slots), and the first slot of this state it lacks.
  std::vector<std::string> checkpoint_slots;
  std::string missing_slot;
  // With with_optimizer: the checkpoint's optimizer slots that `state` lacks
  // (another optimizer's state whose keys include this one's, e.g. AdamW's
  // nu beside the mu Lion reads); a resume refuses them.
  std::vector<std::string> unused_slots;
  // Parameters of the checkpoint ("target/<name>") that `state` lacks: under
  // t5x's strict restore (the default) a resume refuses them.
  std::vector<std::string> unused_params;
  // The data position: this process's when saved with the same process count,
  // else process 0's of another count (the trainer's stream is global, so the
  // position does not depend on the count). data_state_process_count says which.
  std::optional<std::string> data_state_json;
  int data_state_process_count = 0;
};

// Restores `state` (already initialised, so shapes are known) from a
// checkpoint directory. Parameters must all be present with matching shapes
// (the error names the parameter and both shapes). The optimizer state and
// step are restored when the checkpoint holds them all (`with_optimizer`),
// else they keep their fresh values. `dtype` "bfloat16" rounds the
// parameters through bfloat16 (t5x RestoreCheckpointConfig.dtype). The
// checkpoint's leaves are read through `layout`.
// Throws CheckpointError.
RestoreResult restore_train_state(const std::string& ckpt_dir, TrainState& state, bool with_optimizer,
                                  const std::string& dtype, int process_index, int process_count,
                                  const ParamLayout& layout = {});

// The checkpoint's parameters that the model lacks (r.unused_params: it was
// saved by a larger model, e.g. a gin with a layer fewer). Under
// RestoreCheckpointConfig.strict (the default) that is a CheckpointError
// naming one of them, with `hint`: reading part of a checkpoint by mistake
// would run another model than the one trained. With strict = False they are
// dropped and the returned line says so ("warning: ..."). Empty when the
// checkpoint holds no such parameter.
std::string check_unused_params(const RestoreResult& r, bool strict, const std::string& who,
                                const std::string& hint);

// Restores a run's initial checkpoint (t5x's RestoreCheckpointConfig for
// fine-tuning). Without assignment_map, strict and fallback_to_scratch at
// their defaults this is restore_train_state(..., with_optimizer=true).
// Otherwise plan_restore picks each target leaf ("target/...", "state/step",
// "state/param_states/..."): a leaf skipped by a rule (None), or missing under
// fallback_to_scratch, keeps its fresh value. Skipping "state/step" and
// "state/param_states/.*" fine-tunes from the parameters alone, with a fresh
// optimizer and step 0. Throws CheckpointError listing every problem.
RestoreResult restore_initial_state(const std::string& ckpt_dir, TrainState& state,
                                    const RestoreCheckpointConfig& cfg, int process_index, int process_count,
                                    const ParamLayout& layout = {});

// A checkpoint directory from RestoreCheckpointConfig paths: mode 'specific'
// takes the path as a checkpoint_<N> directory (or a model dir's latest);
// 'latest' takes the newest valid checkpoint under the path. nullopt if none.
// A TensorFlow checkpoint prefix (PATH.index exists) is taken as it is; the
// restore maps its Mesh-TF T5 names to t5x paths (t5x's TF restore).
std::optional<std::string> resolve_restore_path(const RestoreCheckpointConfig& cfg);

// Throws std::invalid_argument ("[model] the parameters alone ... exceed this
// machine's memory ...", naming the largest parameter) when the specs' bytes
// over `process_count` processes (the most a layout can split them) exceed
// the physical memory: a mistyped size (num_heads = 2^31) fails before any
// allocation instead of under the out-of-memory killer.
void check_param_memory(const nn::ParamSpecs& specs, int process_count);

// `model`'s parameters drawn from `key` (each from fold_in(key, hash(name)),
// as model.init), laid out on the current spmd context's mesh by `rules`
// (spmd::param_spec): one parameter at a time, so the peak is one whole
// parameter, not the whole model.
ParamTree init_params_on_mesh(const BaseTransformerModel& model, const PRNGKey& key, const LogicalAxisRules& rules);

// True when every float parameter is finite.
bool all_finite(const ParamTree& params, std::string* first_bad = nullptr);

}  // namespace t5x::trainer
