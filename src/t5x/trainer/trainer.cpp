#include "t5x/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>
#include <sstream>
#include <thread>

#include "backend/kernels.h"
#include "mesh/logical_axis_rules.h"
#include "nn/params.h"
#include "ops/elementwise.h"
#include "seqio/mixture.h"
#include "spmd/shard_comm.h"
#include "spmd/spmd.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/fault_inject.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/trainer/partition_report.h"

namespace t5x::trainer {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// What can make an optimizer's step non-finite, by optimizer.
std::string non_finite_hint(const std::string& optimizer) {
  if (optimizer == "optimizers.sgd")
    return "\n  hint: lower the learning rate (SGD's applies to the loss summed over the batch's target tokens; "
           "docs/optimizers.md), clip the gradients (optimizers.chain.transformations = "
           "[@optax.clip_by_global_norm(), @optax.sgd()]) or check the data";
  if (optimizer == "optimizers.lion")  // its step is a sign: clipping the gradients does not bound it
    return "\n  hint: lower the learning rate or the weight_decay (Lion moves each value by lr * (1 + "
           "weight_decay * |param|)), or check the data";
  return "\n  hint: lower the learning rate, enable clipping (adafactor clipping_threshold / "
         "optax.clip_by_global_norm) or check the data";
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32 | rd()) & 0x7fffffffffffffffULL;
}

bool loss_is_normalized(const LossOptions& l) {
  using K = LossNormalizingFactor::Kind;
  return l.loss_normalizing_factor.kind != K::none && l.loss_normalizing_factor.kind != K::constant;
}

}  // namespace

std::string format_metrics(const std::map<std::string, double>& values) {
  std::ostringstream os;
  bool first = true;
  for (const auto& [k, v] : values) {
    if (k.rfind("timing/", 0) == 0) continue;
    os << (first ? "" : "  ") << k << "=" << v;
    first = false;
  }
  return os.str();
}

Trainer::Trainer(TrainRunConfig cfg, Distributed dist, TrainerOptions opt)
    : cfg_(std::move(cfg)),
      dist_(std::move(dist)),
      opt_(opt),
      model_(make_model(cfg_.model)),
      rules_(logical_axis_rules(cfg_.partitioner)),
      ckpt_layout_(checkpoint_layout(*model_, cfg_.optimizer.optimizer.get())) {
  check_expert_mesh();
  check_param_memory(model_->param_specs(), dist_.size());
  if (!dist_.spmd_active()) return;
  // The model's ops on split parameters and batches run through the spmd
  // lowering of dist_'s mesh (the whole mesh, or this data replica's).
  context_scope_.emplace(dist_.spmd);
  lowering_scope_.emplace();
  // Activations on the mesh take their logical-axis layout (t5x's
  // with_sharding_constraint points); single-device arrays stay so (decoding
  // constrains its host-made tokens and cache under a MeshScope).
  constraint_scope_.emplace([rules = rules_](const Array& x) {
    return x.sharding().is_single_device() ? x : spmd::with_sharding_constraint(x, rules);
  });
}

Trainer::~Trainer() = default;

void Trainer::check_expert_mesh() const {
  // One process computes every expert layout alike; on a mesh the layer's
  // all-to-all runs over the mesh's 'expert' axis, which must be its X.
  const T5Config& net = cfg_.model.network;
  if (!dist_.one_mesh || !net.is_moe()) return;
  const int64_t x = net.moe.num_expert_partitions, mesh_x = dist_.num_expert_shards();
  if (x == mesh_x) return;
  const auto& part = cfg_.partitioner;
  std::string hint = part.moe() ? "set NUM_EXPERT_PARTITIONS = " + std::to_string(mesh_x) + " (" + part.name +
                                      " makes 'expert' the largest divisor of the " +
                                      std::to_string(dist_.size() / dist_.num_model_shards) +
                                      " data-parallel processes that is <= num_expert_partitions)"
                                : "use partitioning.MoePjitPartitioner (configs/runs/moe/pretrain.gin or "
                                  "finetune.gin) with NUM_EXPERT_PARTITIONS = " + std::to_string(x);
  throw std::invalid_argument("[trainer] network.T5Config.num_expert_partitions (NUM_EXPERT_PARTITIONS) = " +
                              std::to_string(x) + " but the mesh " + dist_.mesh->to_string() + " of " +
                              std::to_string(dist_.size()) + " processes has " +
                              (part.moe() ? "an 'expert' axis of " + std::to_string(mesh_x) : std::string("no 'expert' axis")) +
                              "\n  hint: " + hint);
}

std::string Trainer::layout() const {
  std::ostringstream os;
  int64_t local = 0;
  for (const auto& [k, p] : state_.params) local += p.local_size();
  std::string axes;
  for (const auto& a : dist_.data_axes) axes += (axes.empty() ? "'" : ", '") + a + "'";
  if (dist_.data_axes.size() > 1) axes = "(" + axes + ")";
  os << "mesh " << dist_.mesh->to_string() << ", " << dist_.size() << " process(es): batch split over " << axes << " ("
     << dist_.num_data_shards << " x " << cfg_.train_ds.batch_size / std::max<int64_t>(1, dist_.num_data_shards)
     << " rows)";
  const auto& part = cfg_.partitioner;
  if (dist_.one_mesh)
    os << "; one spmd mesh for the whole step: parameters and optimizer slots split by logical_axis_rules "
          "(parameter_partitioning_dims = " << part.parameter_partitioning_dims << ", activation_partitioning_dims = "
       << part.activation_partitioning_dims << ")" << (dist_.model_parallel() ? ", split over 'model' (" +
                                                     std::to_string(dist_.num_model_shards) + "-way)" : std::string())
       << (dist_.num_expert_shards() > 1 ? ", expert kernels and their optimizer state split over 'expert' (" +
                                              std::to_string(dist_.num_expert_shards()) + "-way)" : std::string())
       << "; " << local << " of " << model_->num_params() << " parameter values per process";
  else
    os << "; parameters replicated";
  if (dist_.one_mesh && !dist_.blocks_per_replica()) {
    os << "; gradients summed over " << axes << " by the collectives; sums split over "
       << (dist_.data_axes.size() > 1 ? "'data', 'expert' and 'model'" : "'data' and 'model'") << " (mesh_invariant = "
          "False)";
  } else if (dist_.one_mesh) {
    // The one-process run with the same arithmetic (docs/trainer.md, "Several
    // processes"): over 'data' the same gradient blocks, added pairwise (which
    // lines up when each process holds a power of two of them, distributed.h);
    // over 'model' no sum split across processes (mesh-invariant lowering).
    os << "; gradient blocks per data replica on its (data=1, model=" << dist_.num_model_shards
       << ") mesh, summed over 'data' by a pairwise all-reduce";
    const int64_t blocks = cfg_.num_microbatches > 1 ? cfg_.num_microbatches : dist_.num_data_shards;
    const int64_t per_process = blocks / dist_.num_data_shards;
    if (dist_.num_data_shards > 1 && (per_process & (per_process - 1)) == 0)
      os << "; gradient blocks and sums of one process with num_microbatches = " << blocks;
    // Bitwise only where the GEMM sums an element of a block as it sums
    // the whole product (kernels::cpu::gemm_block_invariant); not on AVX2 CPUs.
    if (dist_.model_parallel()) {
      os << "; no sum split over 'model' (mesh_invariant)";
      if (!kernels::cpu::gemm_block_invariant())
        os << ", equal to one process to rounding, not bitwise: this CPU's products are not block-invariant";
    }
  }
  return os.str();
}

void Trainer::message(const std::string& s) {
  if (!dist_.is_chief() || !opt_.log) return;
  if (progress_) progress_->message(s);
  else *opt_.log << s << "\n" << std::flush;
}

void Trainer::initialize() {
  const auto t0 = Clock::now();
  const bool chief = dist_.is_chief();
  (void)local_microbatches();  // a num_microbatches that does not split over 'data' fails here
  // Every process of the run locks MODEL_DIR before process 0 touches it
  // (the broadcast holds process 0 back until all hold theirs): a second run,
  // or the ranks of a killed mpirun still running, wait or are refused.
  dir_lock_ = std::make_unique<ModelDirLock>(cfg_.model_dir, dist_.rank(), 30.0,
                                             [&](const std::string& s) { message(s); });
  (void)dist_.broadcast(uint64_t(0));
  if (cfg_.save.dtype != "float32")
    message("note: checkpoints keep the parameters in " + cfg_.save.dtype + " (utils.SaveCheckpointConfig.dtype): a "
            "run resumed from one goes on from the rounded parameters, so it does not end bitwise where an "
            "uninterrupted run would (as in t5x); save float32 for exact resumes");
  if (chief) {
    fs::create_directories(cfg_.model_dir);
    // The mesh checks the model's own layout; the file lists the
    // parameters as checkpoints hold them (t5x lists scalable_t5's stacked ones).
    std::string info = model_info(model_->param_specs(), rules_, &dist_.mesh->desc());
    if (!ckpt_layout_.identity()) info = model_info(checkpoint_param_specs(model_->param_specs(), ckpt_layout_), rules_);
    std::ofstream(cfg_.model_dir + "/model-info.txt") << info;
  }
  // Seeds: random_seed, else one drawn by process 0 and shared.
  uint64_t rng_seed = cfg_.random_seed ? uint64_t(*cfg_.random_seed) : dist_.broadcast(fresh_seed());
  data_state_ = {};
  data_state_.rng_seed = rng_seed;
  data_state_.seed = cfg_.train_ds.seed ? *cfg_.train_ds.seed : rng_seed;

  const PRNGKey init_key = prng_key(int64_t(rng_seed & 0x7fffffff));
  if (dist_.spmd_active()) {
    // Each parameter draws from fold_in(key, hash(name)), independent of the
    // others: initialise one at a time and keep this process's shard, so the
    // peak is one whole parameter, not the whole model.
    state_.params = init_params_on_mesh(*model_, init_key, rules_);
  } else {
    state_.params = model_->init(init_key);
  }
  state_.opt = cfg_.optimizer.optimizer->init(state_.params);

  std::optional<seqio::BatchPosition> resume;
  restored_from_model_dir_ = false;
  // Process 0 alone looks at MODEL_DIR, before any save of this run has
  // begun (the broadcast below holds the others back): it removes the
  // temporary directories of interrupted saves, verifies the newest
  // checkpoint's manifest checksums, and moves damaged steps aside so that
  // they are trained and saved again (docs/checkpoints.md).
  std::optional<int64_t> found;
  if (chief) {
    for (const auto& t : remove_temp_dirs(cfg_.model_dir))
      message("removed " + t + ": half-written temporary directory of an interrupted save");
    const int threads = int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    StepScan scan = latest_valid_step(cfg_.model_dir, {.verify = Verify::kChecksums, .move_damaged_aside = true,
                                                       .num_threads = threads});
    if (!scan.skipped.empty()) {
      std::string report = scan.report();
      report.pop_back();  // message() ends the line
      message("warning: checkpoints skipped while looking for the latest one:\n" + report);
    }
    found = scan.step;
  }
  const uint64_t shared = dist_.broadcast(found ? uint64_t(*found) : ~uint64_t(0));
  if (shared != ~uint64_t(0)) found = int64_t(shared);
  if (found) {
    const std::string dir = checkpoint_dir_for_step(cfg_.model_dir, *found);
    auto r = restore_train_state(dir, state_, true, "", dist_.rank(), dist_.size(), ckpt_layout_);
    // A resume continues the run's optimizer: state saved by another optimizer
    // is an error (t5x fails on the state's structure), not a silent restart.
    if (!r.optimizer_restored && !r.checkpoint_slots.empty())
      throw CheckpointError("[trainer] " + dir + " holds the optimizer state of another optimizer (e.g. '" +
                            r.checkpoint_slots.front() + "'), not this OPTIMIZER's (" +
                            (r.missing_slot.empty() ? std::string("'state/step' is missing")
                                                    : "'" + r.missing_slot + "' is missing") +
                            ")\n  hint: resume with the OPTIMIZER the run was trained with, or "
                            "fine-tune from the checkpoint (INITIAL_CHECKPOINT_PATH, a fresh MODEL_DIR) to "
                            "start a new optimizer state");
    // t5x restores strictly unless RestoreCheckpointConfig.strict = False: a
    // resume into a smaller model must not drop the checkpoint's extra layers.
    if (auto w = check_unused_params(r, cfg_.restore.strict, "trainer",
                                     "resume with the model gin the run was trained with; to train a smaller "
                                     "model from part of it, fine-tune from the checkpoint in a fresh MODEL_DIR "
                                     "(INITIAL_CHECKPOINT_PATH) with utils.RestoreCheckpointConfig.strict = False");
        !w.empty())
      message(w);
    // The same when this OPTIMIZER's slots are a subset of the checkpoint's
    // (Lion's mu and count among AdamW's): the rest would be dropped.
    // Slots of parameters dropped above (strict = False) go with them:
    // "<param>/v_row" (Adafactor), "0/mu/<param>" (optax).
    std::vector<std::string> unused_slots;
    for (const auto& k : r.unused_slots) {
      bool of_dropped = false;
      for (const auto& p : r.unused_params) of_dropped = of_dropped || k.starts_with(p + "/") || k.ends_with("/" + p);
      if (!of_dropped) unused_slots.push_back(k);
    }
    if (r.optimizer_restored && !unused_slots.empty())
      throw CheckpointError("[trainer] " + dir + " holds optimizer state this OPTIMIZER does not have (e.g. '" +
                            unused_slots.front() + "', " + std::to_string(unused_slots.size()) +
                            " slot(s)): it was saved by another optimizer or another setting of this one\n  hint: "
                            "resume with the OPTIMIZER the run was trained with, or fine-tune from the checkpoint "
                            "(INITIAL_CHECKPOINT_PATH, a fresh MODEL_DIR) to start a new optimizer state");
    if (state_.step() != *found)  // the save names it by its step; no manifest caught the change
      throw CheckpointError("[trainer] " + dir + " holds step " + std::to_string(state_.step()) +
                            ", not the step of its name\n  hint: the checkpoint was altered or renamed; move it "
                            "out of MODEL_DIR to resume from the one before");
    restored_from_model_dir_ = true;
    if (r.data_state_json) {
      const int from = r.data_state_process_count == dist_.size() ? dist_.rank() : 0;
      data_state_ = data_state_from_json(*r.data_state_json,
                                         dir + "/" + dataset_state_file_name(from, r.data_state_process_count));
      resume = data_state_.position;
      if (r.data_state_process_count != dist_.size())
        message("data position from the run on " + std::to_string(r.data_state_process_count) +
                " process(es) (every process reads the global stream, so it carries over)");
    } else {
      message("warning: " + dir + " holds no data position for " + std::to_string(dist_.size()) +
              " process(es); the data stream restarts from its beginning");
    }
    // A checkpoint without optimizer state (t5x ckpt import-hf / import-tf
    // writes only the parameters): the optimizer starts fresh, said so.
    message("resumed from " + dir + " at step " + std::to_string(state_.step()) +
            (r.optimizer_restored ? "" : " (parameters only: it holds no optimizer state, which starts fresh)"));
  } else if (auto path = resolve_restore_path(cfg_.restore)) {
    auto r = restore_initial_state(*path, state_, cfg_.restore, dist_.rank(), dist_.size(), ckpt_layout_);
    if (auto w = check_unused_params(r, cfg_.restore.strict, "trainer",
                                     "check that the model gin matches the checkpoint's (its config.gin); to "
                                     "fine-tune a smaller model from part of it, set "
                                     "utils.RestoreCheckpointConfig.strict = False (or an assignment_map)");
        !w.empty())
      message(w);
    message("restored " + std::string(r.optimizer_restored ? "parameters and optimizer state" : "parameters") +
            " from " + r.dir + " (step " + std::to_string(state_.step()) + ")");
  }
  // After the restore: a run whose config cannot read MODEL_DIR's checkpoints
  // leaves the config.gin that describes them (export-hf reads it).
  if (chief && opt_.gin) opt_.gin->write_operative_config(cfg_.model_dir);
  data_ = std::make_unique<TrainData>(cfg_.train_ds, cfg_.model, data_state_.seed, dist_.data_shard,
                                      dist_.num_data_shards, resume);
  if (cfg_.infer_eval_ds) infer_eval_ = std::make_unique<InferenceEvaluator>(*cfg_.infer_eval_ds, cfg_.model, cfg_.evaluator);
  // A task without the evaluation's split is skipped, as t5x does; said
  // once (the evaluation did nothing, silently, where no task had it).
  for (const DatasetConfig* d : {cfg_.train_eval_ds ? &*cfg_.train_eval_ds : nullptr,
                                 cfg_.infer_eval_ds ? &*cfg_.infer_eval_ds : nullptr})
    if (d && chief)
      for (const auto& task : seqio::get_subtasks(d->mixture_or_task_name))
        if (const auto sp = task->splits(); std::find(sp.begin(), sp.end(), d->split) == sp.end())
          message("warning: task '" + task->name() + "' has no split '" + d->split + "', so the " +
                  (cfg_.train_eval_ds && d == &*cfg_.train_eval_ds ? "training" : "inference") + " evaluation skips it");
  train_log_ = SummaryLogger(summary_dir(cfg_.model_dir, SummaryKind::kTrain), chief);
  if (chief && opt_.gin) train_log_.text(state_.step(), "config/gin", opt_.gin->operative_config_str());
  train_log_.write(state_.step(), {{"timing/init_or_restore_seconds", seconds_since(t0)}});
  initialized_ = true;
}

double Trainer::normalizing_factor(const Batch& b) const {
  return loss_normalizing_factor_and_weights(cfg_.model.loss.loss_normalizing_factor, b).first.value_or(0.0);
}

int64_t Trainer::local_microbatches() const {
  const int64_t m = std::max<int64_t>(1, cfg_.num_microbatches), d = dist_.data->size();
  const int64_t b = cfg_.train_ds.batch_size;
  if (b % d != 0)
    throw std::invalid_argument("[trainer] BATCH_SIZE = " + std::to_string(b) + " is not divisible by the " +
                                std::to_string(d) + " data-parallel processes\n  hint: use a multiple of " +
                                std::to_string(d) + " (each process feeds BATCH_SIZE / " + std::to_string(d) +
                                " rows), or change num_partitions");
  if (m > 1 && b % m != 0)
    throw std::invalid_argument("[trainer] BATCH_SIZE = " + std::to_string(b) +
                                " is not divisible by trainer.Trainer.num_microbatches = " + std::to_string(m) +
                                "\n  hint: use a num_microbatches that divides the global batch");
  if (m == 1) return 1;
  if (m % d != 0)
    throw std::invalid_argument("[trainer] trainer.Trainer.num_microbatches = " + std::to_string(m) +
                                " is not a multiple of the " + std::to_string(d) +
                                " data-parallel processes\n  hint: use a multiple of " + std::to_string(d) +
                                " (each process runs num_microbatches / " + std::to_string(d) + " of them) or None");
  return m / d;
}

StepOutput Trainer::train_step(const Batch& host_batch) {
  StepOutput out;
  const int64_t step = state_.step();
  out.learning_rate = cfg_.optimizer.schedule(step);
  // num_microbatches counts microbatches of the global batch, as in t5x; each
  // data shard runs its n_micro consecutive ones (global index
  // data_shard * n_micro + i). One process with N microbatches and D
  // processes with N / D each then compute the same blocks and sum them in
  // the same pairwise order (accumulate_grads_microbatched, then over 'data').
  // With partial sums, microbatch i is the global array of every data
  // shard's local microbatch i.
  const int64_t n_micro = local_microbatches();
  // Mesh-invariant on several processes: each data replica runs its blocks
  // on its (1, model) mesh (a shard_map over 'data', distributed.h).
  const bool apart = dist_.blocks_per_replica();
  // More than one gradient block in the global batch (microbatches, or data
  // shards: None on D processes is D blocks, as num_microbatches = D on one).
  const bool split = cfg_.num_microbatches > 1 || dist_.num_data_shards > 1;
  // The step's key: t5x's train step always passes one (enable_dropout),
  // which also puts the MoE layers in training mode (train capacity
  // factor, jitter) at dropout rate 0, as pretraining runs.
  std::optional<PRNGKey> step_rng;
  if (cfg_.model.network.dropout_rate > 0 || cfg_.model.network.is_moe())
    step_rng = fold_in(prng_key(int64_t(data_state_.rng_seed & 0x7fffffff)), uint32_t(step));
  // A normalized loss (t5x's loss_normalizing_factor, e.g. the number of
  // target tokens) divides by the whole step's factor: each gradient block
  // weights its own normalized loss by its share of that factor, so the
  // gradient is the full batch's however the batch is cut.
  const bool shares = loss_is_normalized(cfg_.model.loss) && (cfg_.num_microbatches > 1 || (apart && split));
  // The factor of this process's `rows`, summed over 'data' when the block
  // is a global array (partial sums; a block run apart is its own rows).
  auto factor = [&](const Batch& rows, bool global) {
    std::vector<double> f = {normalizing_factor(rows)};
    if (global) dist_.sum_over_data(f);
    return f[0];
  };
  const double step_factor = shares ? factor(host_batch, true) : 0.0;
  double local_loss = 0;
  // The block program's parameters: this replica's copy (gathered over
  // 'data'), on its (1, model) mesh.
  ParamTree replica_params;
  std::optional<spmd::ContextScope> in_replica;
  if (apart) {
    replica_params = to_replica(state_.params);
    in_replica.emplace(dist_.replica);
  }
  const ParamTree& params = apart ? replica_params : state_.params;
  ParamTree grads = accumulate_grads_microbatched(params, n_micro, [&](int64_t i) {
    Batch mb = n_micro > 1 ? get_microbatch(host_batch, i, n_micro) : host_batch;
    const double share = !shares ? 1.0 : step_factor > 0 ? factor(mb, !apart) / step_factor : 0.0;
    if (!apart && dist_.one_mesh) mb = global_batch(mb);
    // Dropout keys per gradient block of the global batch (data shard d's
    // microbatch i is block d * n_micro + i), the same in both modes and on
    // one process with that many microbatches; one unfolded key when the
    // step is one block. A global microbatch (partial sums) draws each data
    // shard's rows from its block's key (nn::DropoutKeys).
    nn::DropoutKeys rng;
    if (step_rng && !split) {
      rng = *step_rng;
    } else if (step_rng && (apart || dist_.num_data_shards == 1)) {
      rng = fold_in(*step_rng, uint32_t(int64_t(dist_.data_shard) * n_micro + i));
    } else if (step_rng) {
      std::vector<PRNGKey> keys;
      for (int64_t d = 0; d < dist_.num_data_shards; ++d) keys.push_back(fold_in(*step_rng, uint32_t(d * n_micro + i)));
      rng = nn::DropoutKeys::per_block(std::move(keys));
    }
    Metrics m;
    auto vg = spmd::value_and_grad(
        [&](const ParamTree& p) {
          auto [loss, metrics] = model_->loss_fn(p, mb, rng);
          m = std::move(metrics);
          return share == 1.0 ? loss : mul(loss, share);
        },
        params);
    local_loss += vg.value.item();
    if (share != 1.0)
      for (const char* k : {"loss", "z_loss", "cross_ent_loss"})
        if (m.count(k)) m[k].total *= share;
    // Microbatches sum totals, and an average's counts (Metric).
    for (const auto& [k, v] : m) {
      Metric& d = out.metrics.try_emplace(k, Metric{0.0, 0.0, v.per_step}).first->second;
      d.total += v.total;
      d.count = v.per_step ? 1.0 : d.count + v.count;
    }
    return std::move(vg.grads);
  });
  in_replica.reset();
  if (apart) {
    // Out of the block program: each gradient summed over 'data' (pairwise,
    // in shard order) into its parameter's layout; the loss and the metrics
    // (float64) likewise. (With partial sums the vjps of the collectives did
    // it, and the loss and metrics came from global arrays.)
    grads = sum_replica_grads(std::move(grads));
    std::vector<double> buf = {local_loss};
    for (const auto& [k, v] : out.metrics) { buf.push_back(v.total); buf.push_back(v.count); }
    dist_.sum_over_data(buf);
    size_t j = 0;
    out.loss = buf[j++];
    for (auto& [k, v] : out.metrics) {
      v.total = buf[j++];
      v.count = v.per_step ? (++j, 1.0) : buf[j++];  // a per-step value's count stays one
    }
  } else {
    out.loss = local_loss;
  }
  out.finite = out.loss_finite = std::isfinite(out.loss);
  if (!out.finite) return out;  // no update: the state stays the last good one
  fault_point("train_step", step + 1);
  // Split params update on their shards; the optimizer's few cross-shard
  // sums run over this run's context.
  const ShardComm comm = spmd::shard_comm();
  cfg_.optimizer.optimizer->apply_gradient(state_.params, state_.opt, grads, out.learning_rate,
                                           dist_.spmd_active() ? &comm : nullptr);
  out.finite = all_finite(state_.params);
  // Each process sees only its shards: agree, so every process stops together.
  if (dist_.spmd_active()) out.finite = dist_.min_over_world(out.finite ? 1 : 0) == 1;
  return out;
}

namespace {

// `spec` without the 'data' axis: the layout of a parameter inside a data
// replica's block program.
PartitionSpec without_data(const PartitionSpec& spec) {
  PartitionSpec out = spec;
  for (auto& axes : out.dims) std::erase(axes, std::string("data"));
  return out;
}

}  // namespace

ParamTree Trainer::to_replica(const ParamTree& params) const {
  // The broadcast into the shard_map over 'data': a parameter split over
  // 'data' (2-D partitioning) is gathered over it first (exact), then each
  // process's shard is relabelled onto its replica's (1, model) mesh, or is
  // a plain array when that mesh is one process.
  ParamTree out;
  for (const auto& [k, p] : params) {
    const PartitionSpec spec = spmd::spec_of(p), kept = without_data(spec);
    const Array local = spmd::to_local(kept == spec ? p : spmd::reshard(p, kept));
    out[k] = dist_.model_parallel() ? spmd::from_local(local, p.shape(), dist_.replica->sharding(kept)) : local;
  }
  return out;
}

ParamTree Trainer::sum_replica_grads(ParamTree grads) const {
  // The transpose of to_replica: each block gradient summed over 'data' by
  // the mesh-invariant all-reduce (pairwise in data-shard order, the order
  // in which one process adds its microbatches), then cut to its parameter's
  // layout (a 'data'-split parameter keeps its block of the sum).
  for (auto& [k, g] : grads) {
    const Array& p = state_.params.at(k);
    const PartitionSpec spec = spmd::spec_of(p), kept = without_data(spec);
    const Array local = spmd::to_local(g);
    Array sum = spmd::all_reduce(local.dtype() == DType::f32 ? local : cast(local, DType::f32), {"data"});
    if (local.dtype() != DType::f32) sum = cast(sum, local.dtype());
    const Array whole = spmd::from_local(sum, p.shape(), dist_.spmd->sharding(kept));
    g = kept == spec ? whole : spmd::reshard(whole, spec);
  }
  return grads;
}

Batch Trainer::global_batch(const Batch& local) const {
  Batch out;
  for (const auto& [k, a] : local) {
    std::vector<Dim> dims = a.shape().dims();
    dims.at(0).size *= dist_.num_data_shards;
    out[k] = spmd::from_local(a, Shape(dims), spmd::context().sharding(dist_.batch_spec(a.rank())));
  }
  return out;
}

std::string Trainer::save() {
  const auto t0 = Clock::now();
  SaveContext ctx;
  ctx.process_index = dist_.rank();
  ctx.process_count = dist_.size();
  ctx.durable = opt_.durable_checkpoints;
  if (dist_.size() > 1) ctx.barrier = [this](const std::string&) { dist_.world->barrier(); };
  ctx.timestamp = int64_t(dist_.broadcast(uint64_t(std::time(nullptr))));
  DataState ds = data_state_;
  ds.position = data_->position();
  std::string dir;
  try {
    dir = save_train_state(cfg_.model_dir, state_, cfg_.save, data_state_to_json(ds), ctx, ckpt_layout_);
  } catch (const CheckpointError& e) {
    // Name what is still there: the save never touches complete checkpoints.
    auto latest = latest_step(cfg_.model_dir);
    const std::string_view why = e.what();
    const bool disk_full = why.find("(ENOSPC)") != why.npos || why.find("(EDQUOT)") != why.npos;
    throw CheckpointError("saving the checkpoint of step " + std::to_string(state_.step()) + " failed: " + e.what() +
                          "\n  the newest complete checkpoint is " +
                          (latest ? checkpoint_dir_for_step(cfg_.model_dir, *latest) : std::string("(none)")) +
                          " (intact); training stopped" +
                          (disk_full ? "\n  hint: or keep fewer checkpoints (utils.SaveCheckpointConfig.keep)" : ""));
  }
  train_log_.write(state_.step(), {{"timing/checkpoint_seconds", seconds_since(t0)}});
  return dir;
}

void Trainer::evaluate() {
  const auto t0 = Clock::now();
  const int64_t step = state_.step();
  // Both evaluations run on the mesh with the parameters as training lays
  // them out, each global batch split over 'data'.
  if (cfg_.train_eval_ds) {
    auto res = evaluate_teacher_forced(*model_, cfg_.model, state_.params, *cfg_.train_eval_ds, cfg_.eval_steps, dist_);
    for (const auto& [task, values] : res) {
      auto it = eval_logs_.find(task);
      if (it == eval_logs_.end())
        it = eval_logs_
                 .emplace(task, SummaryLogger(summary_dir(cfg_.model_dir, SummaryKind::kTrainingEval, task),
                                              dist_.is_chief()))
                 .first;
      it->second.write(step, values);
      message("training_eval/" + task + " step " + std::to_string(step) + ": loss " +
              std::to_string(values.count("loss") ? values.at("loss") : NAN) + "  accuracy " +
              std::to_string(values.count("accuracy") ? values.at("accuracy") : NAN));
    }
  }
  fault_point("eval", step);
  if (infer_eval_ && !infer_eval_->empty()) {
    MeshScope on_mesh(dist_, rules_);
    auto res = infer_eval_->run(*model_, state_.params, dist_, step,
                                dist_.is_chief() ? summary_dir(cfg_.model_dir, SummaryKind::kInferenceEval) : "",
                                [this](const std::string& line) { message(line); });
    for (const auto& [task, r] : res) {
      std::ostringstream os;
      os << "inference_eval/" << task << " step " << step << ":";
      for (const auto& [k, v] : r.metrics) os << " " << k << " " << v;
      message(os.str());
    }
  }
  dist_.barrier();
  if (dist_.is_chief()) record_evaluated_step(cfg_.model_dir, step);
  train_log_.write(step, {{"timing/evaluate_seconds", seconds_since(t0)}});
}

TrainResult Trainer::train() {
  if (!initialized_) initialize();
  TrainResult res;
  const int64_t start = state_.step();
  const int64_t total = cfg_.relative_steps ? start + *cfg_.relative_steps : cfg_.total_steps;
  const int64_t ckpt_period = cfg_.save.period > 0 ? cfg_.save.period : total;
  int64_t stats_period = cfg_.stats_period;
  if (stats_period <= 0) {
    stats_period = std::min<int64_t>(10, ckpt_period);
    if (cfg_.eval_period > 0) stats_period = std::min(stats_period, cfg_.eval_period);
  }
  if (dist_.is_chief() && opt_.log)
    progress_ = std::make_unique<ProgressLine>(opt_.log, start, total, opt_.tty, stats_period);
  message("training " + std::to_string(model_->num_params()) + " parameters on " + layout() + "; steps " +
          std::to_string(start) + " -> " + std::to_string(total) + ", global batch " +
          std::to_string(cfg_.train_ds.batch_size));
  message("optimizer " + cfg_.optimizer.description + "; " + cfg_.trainer_class + " with " +
          std::to_string(cfg_.num_microbatches) + " microbatch(es) a step");
  // What each process holds (2-D parameter partitioning splits it over
  // 'data' too): the largest share over the processes.
  if (dist_.size() > 1) {
    int64_t local = 0, whole = 0;
    const auto add = [&](const Array& a) {
      local += int64_t(a.nbytes());
      whole += a.shape().numel() * int64_t(dtype_size(a.dtype()));
    };
    for (const auto& [k, p] : state_.params) add(p);
    for (const auto& [k, s] : state_.opt.slots) add(s);
    const int64_t most = -dist_.min_over_world(-local);
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.2f%%", 100.0 * double(most) / double(std::max<int64_t>(whole, 1)));
    message("parameter + optimizer-state bytes per process: at most " + std::to_string(most) + " of one process's " +
            std::to_string(whole) + " (" + pct + ")");
  }
  // As in t5x, nothing is trained then; say so rather than look done.
  if (total < start)
    message("warning: TRAIN_STEPS = " + std::to_string(total) + " is below the restored step " +
            std::to_string(start) + ": no step is trained (raise TRAIN_STEPS, or use another MODEL_DIR)");
  // t5x saves before the loop unless the state came from MODEL_DIR itself.
  if (!restored_from_model_dir_) save();
  if (cfg_.run_eval_before_training) evaluate();

  MetricAccumulator acc;
  auto window_t0 = Clock::now();
  int64_t window_tokens = 0, window_seqs = 0, window_steps = 0;
  double window_sent = 0;  // bytes this process's communicators sent in the window's steps
  while (state_.step() < total) {
    const auto t_step = Clock::now();
    Batch batch = data_->next();
    const double sent_before = dist_.one_mesh ? step_counters(dist_).total_bytes() : 0;
    StepOutput so = train_step(batch);
    if (dist_.one_mesh) window_sent += step_counters(dist_).total_bytes() - sent_before;
    ++window_steps;
    if (!so.finite) {
      // The step that failed, and the last step whose state was finite.
      const int64_t failed = so.loss_finite ? state_.step() : state_.step() + 1;
      auto latest = latest_step(cfg_.model_dir);
      res.status = TrainResult::Status::kNonFinite;
      res.step = failed - 1;
      res.last_loss = so.loss;
      auto g = [](double x) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", x);
        return std::string(b);
      };
      res.message = "non-finite " + std::string(so.loss_finite ? "parameters after the update" : "loss (" + g(so.loss) + ")") +
                    " at step " + std::to_string(failed) + " (learning rate " + g(so.learning_rate) +
                    "); training stopped without saving. The last good checkpoint is " +
                    (latest ? checkpoint_dir_for_step(cfg_.model_dir, *latest) : std::string("(none)")) +
                    non_finite_hint(cfg_.optimizer.optimizer->name());
      if (progress_) progress_->finish();
      return res;  // the caller reports res.message (`t5x train` on stderr, once)
    }
    acc.add(so.metrics);
    acc.end_step();
    acc.add_step_value("learning_rate", so.learning_rate);
    res.losses.push_back(so.loss);
    res.last_loss = so.loss;
    const int64_t step = state_.step();
    const int64_t rows = batch_rows(batch) * dist_.num_data_shards;
    const int64_t len = batch.count("decoder_target_tokens") ? batch.at("decoder_target_tokens").dim("length") : 0;
    window_seqs += rows;
    window_tokens += rows * len;
    const double step_s = seconds_since(t_step);
    if (progress_)
      progress_->update(step, so.loss, acc.last("loss_per_nonpadding_target_token"),
                        rows * len / std::max(step_s, 1e-9), so.learning_rate);

    if (step % stats_period == 0 || step == total) {
      const double secs = seconds_since(window_t0);
      auto values = acc.values();
      values["timing/seconds"] = secs;
      values["timing/steps_per_second"] = double(acc.steps()) / secs;
      values["timing/seqs_per_second"] = double(window_seqs) / secs;
      values["timing/target_tokens_per_second"] = double(window_tokens) / secs;
      values["timing/seqs"] = double(window_seqs);
      values["learning_rate/current"] = so.learning_rate;
      // Process 0's, to hold against `t5x partition --rank=0` (not a t5x summary).
      if (dist_.one_mesh) values["communication/bytes_sent_per_step"] = window_sent / double(window_steps);
      train_log_.write(step, values);
      acc.reset();
      window_t0 = Clock::now();
      window_seqs = window_tokens = window_steps = 0;
      window_sent = 0;
    }
    if (step % ckpt_period == 0 || step == total) save();
    if ((cfg_.eval_period > 0 && step % cfg_.eval_period == 0) || step == total) evaluate();
    if (opt_.stop_after_step >= 0 && step >= opt_.stop_after_step && step < total) {
      res.status = TrainResult::Status::kStopped;
      res.step = step;
      if (progress_) progress_->finish();
      return res;
    }
  }
  // Restored at the last step: redo a final evaluation that a kill cut short.
  const bool has_eval = cfg_.train_eval_ds || cfg_.infer_eval_ds;
  if (has_eval && restored_from_model_dir_ && start == total &&
      dist_.broadcast(last_evaluated_step(cfg_.model_dir) == total ? 1 : 0) == 0) {
    message("the final evaluation at step " + std::to_string(total) + " did not finish; running it");
    evaluate();
  }
  if (progress_) progress_->finish();
  res.step = state_.step();
  message("done at step " + std::to_string(res.step) +
          (res.losses.empty() ? " (no step trained)" : ", loss " + std::to_string(res.last_loss)));
  return res;
}

}  // namespace t5x::trainer
