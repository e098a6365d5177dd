// The training loop of t5x's train.py + trainer.Trainer (t5x.md 8), on the
// layers below: seqio batches -> value_and_grad of the model's loss_fn
// (summed over num_microbatches) -> gradient sum over the data group ->
// optimizer update; periodic summaries, checkpoints and evaluation.
//
// num_microbatches cuts the global batch (t5x's count); with D data-parallel
// processes each runs num_microbatches / D of them (D must divide it). One
// process with N microbatches and D processes then sum the same gradient
// blocks in the same pairwise order: with D = 2 the runs are bitwise equal
// (test: TrainerMpi.MicrobatchesSplitOverDataAreBitwiseEqual).
//
// Init priority (t5x): (1) the newest VALID checkpoint in MODEL_DIR (resume:
// parameters, optimizer state, step and this process's data position, so
// the resumed run reads exactly the batches the uninterrupted run would);
// (2) RestoreCheckpointConfig.path (e.g. INITIAL_CHECKPOINT_PATH of
// finetune.gin: parameters, plus optimizer state and step when present);
// (3) fresh initialisation from random_seed.
//
// Periods: a checkpoint before the loop (fresh or restored-from-path runs),
// every SaveCheckpointConfig.period steps and at the last step;
// teacher-forced + inference evaluation every eval_period steps and at the
// end; train summaries every stats_period steps (default min(eval_period,
// checkpoint period, 10)).
//
// Layout (trainer/distributed.h): rows split over 'data'; on a 'model' axis
// of M > 1 processes the parameters and optimizer slots are split over
// 'model' by logical_axis_rules (spmd::shard_params), the loss and gradients
// run through the spmd lowering (installed, with the context, for the Trainer's
// lifetime only: two runs in one process do not see each other's), Adafactor gathers each
// param over 'model' for its update, and checkpoints are written and read
// shard by shard (train_state.h). Teacher-forced evaluation runs sharded;
// inference evaluation decodes with params gathered over 'model'.
//
// Normalisation under data parallelism: the loss is t5x's token SUM by
// default (LOSS_NORMALIZING_FACTOR = None), so the global gradient is the
// plain sum of the per-process gradients. With a per-batch normalising factor
// (NUM_REAL_TARGET_TOKENS, ...) each process's loss and gradients are scaled
// by its share of the global denominator (local / global), which again makes
// the sum equal the global-batch value.
//
// Non-finite loss or parameters stop the run (TrainResult::status) before
// anything is saved: the newest checkpoint on disk is the last good one.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "mesh/logical_axis_rules.h"
#include "nn/constraint.h"
#include "spmd/context.h"
#include "spmd/dispatch.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/gin/config.h"
#include "t5x/trainer/data.h"
#include "t5x/trainer/distributed.h"
#include "t5x/trainer/evaluation.h"
#include "t5x/trainer/metrics_log.h"
#include "t5x/trainer/run_config.h"
#include "t5x/trainer/train_state.h"

namespace t5x::trainer {

struct TrainerOptions {
  std::ostream* log = nullptr;          // progress and messages (chief only); nullptr: silent
  bool tty = false;                     // redraw the progress line in place
  int64_t stop_after_step = -1;         // test hook: return after this step (as if killed)
  const gin::Config* gin = nullptr;     // written to MODEL_DIR/config.gin when set
  bool durable_checkpoints = true;      // fsync checkpoint files (tests turn it off for speed)
};

struct StepOutput {
  double loss = 0;            // global (summed over the data group)
  double learning_rate = 0;
  Metrics metrics;            // this process's merged microbatch metrics
  bool finite = true;       // loss and updated parameters finite
  bool loss_finite = true;
};

struct TrainResult {
  enum class Status { kDone, kStopped, kNonFinite };
  Status status = Status::kDone;
  int64_t step = 0;
  double last_loss = 0;
  std::string message;         // why kNonFinite stopped the run (not printed: the caller reports it)
  std::vector<double> losses;  // per step run in this call
};

class Trainer {
 public:
  Trainer(TrainRunConfig cfg, Distributed dist, TrainerOptions opt = {});
  ~Trainer();

  // The whole run (init/resume, loop, saves, evaluation).
  TrainResult train();

  // Pieces (also used by tests).
  void initialize();  // init priority above; sets state(), data
  StepOutput train_step(const Batch& host_batch);
  const TrainState& state() const { return state_; }
  TrainState& mutable_state() { return state_; }
  const BaseTransformerModel& model() const { return *model_; }
  const TrainRunConfig& config() const { return cfg_; }
  std::string save();  // checkpoint of the current state
  // "mesh (data=2, model=2), 4 process(es): batch split over 'data' ..." (the startup line).
  std::string layout() const;
  void evaluate();     // teacher-forced + inference evaluation at the current step

 private:
  TrainRunConfig cfg_;
  Distributed dist_;
  std::unique_ptr<ModelDirLock> dir_lock_;  // one run per MODEL_DIR (checkpoint_dir.h)
  TrainerOptions opt_;
  // Model-parallel runs: dist_'s spmd context and the spmd lowering, for the
  // Trainer's lifetime; the previous ones come back after it (declared
  // before the state so that sharded arrays go first).
  std::optional<spmd::ContextScope> context_scope_;
  std::optional<spmd::InstallScope> lowering_scope_;
  std::unique_ptr<BaseTransformerModel> model_;
  LogicalAxisRules rules_;  // partitioner's logical_axis_rules (parameters' layout)
  ParamLayout ckpt_layout_;  // the leaves' layout in checkpoints (scalable_t5's, or as the model holds them)
  // Model-parallel runs: t5x's activation sharding constraints (nn::constrain)
  // by rules_, for the Trainer's lifetime.
  std::optional<nn::ActivationConstraintScope> constraint_scope_;
  TrainState state_;
  std::unique_ptr<TrainData> data_;
  DataState data_state_;
  std::unique_ptr<InferenceEvaluator> infer_eval_;
  SummaryLogger train_log_;
  std::map<std::string, SummaryLogger> eval_logs_;
  std::unique_ptr<ProgressLine> progress_;
  bool initialized_ = false;
  bool restored_from_model_dir_ = false;

  void message(const std::string& s);
  // The loss normalizing factor of a batch (t5x's loss_normalizing_factor).
  double normalizing_factor(const Batch& b) const;
  // num_microbatches / data-parallel processes. Throws unless it divides, or
  // unless BATCH_SIZE divides over the processes and the microbatches.
  int64_t local_microbatches() const;
  // One mesh: this process's rows as its shard of the global batch, split
  // over Distributed::data_axes (every dim but the first replicated).
  Batch global_batch(const Batch& local) const;
  // Mesh-invariant steps (Distributed::replica): parameters into this data
  // replica's block program, and its gradients back out, summed over 'data'.
  ParamTree to_replica(const ParamTree& params) const;
  ParamTree sum_replica_grads(ParamTree grads) const;
  // An MoE model on a mesh: its num_expert_partitions must be the mesh's
  // 'expert' axis; throws std::invalid_argument naming the binding otherwise.
  void check_expert_mesh() const;
};

// Human-readable step/loss line for logs.
std::string format_metrics(const std::map<std::string, double>& values);

}  // namespace t5x::trainer
