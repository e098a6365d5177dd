// The run settings t5x's train.py / eval.py / infer.py take from gin, read out
// of a gin::Config into plain structs, and the objects they build (model,
// optimizer, learning-rate schedule, feature converter).
//
// Gin names read (t5x.md 7; configs/runs/*.gin):
//   train_script.train: model, model_dir, train_dataset_cfg, train_eval_dataset_cfg,
//     infer_eval_dataset_cfg, checkpoint_cfg, partitioner, total_steps, eval_steps,
//     eval_period, stats_period, random_seed, relative_steps, run_eval_before_training
//   eval_script.evaluate: model, dataset_cfg, restore_checkpoint_cfg, partitioner, output_dir
//   infer_script.infer: mode, model, dataset_cfg, restore_checkpoint_cfg, partitioner,
//     output_dir, checkpoint_period, shard_id, num_shards
//   models.EncoderDecoderModel / models.DecoderOnlyModel: module (-> network.Transformer.config
//     = network.T5Config, or network.DecoderWrapper.config = network.TransformerConfig),
//     optimizer_def, z_loss, label_smoothing, loss_normalizing_factor
//   adafactor.Adafactor, optimizers.adamw / optax.adamw, optimizers.sgd,
//   optimizers.chain(clip_by_global_norm, adamw)
//   trainer.Trainer: num_microbatches, learning_rate_fn (utils.create_learning_rate_scheduler
//     or an optax schedule)
//   utils.DatasetConfig (+ seqio.add_global_cache_dirs.global_cache_dirs),
//   utils.SaveCheckpointConfig, utils.RestoreCheckpointConfig,
//   partitioning.PjitPartitioner (num_partitions, model_parallel_submesh), or
//     partitioning.MoePjitPartitioner (the same plus num_expert_partitions; t5x contrib/moe)
//   random_spans_noise_mask.random_roll (T5 span corruption): read with every
//     DatasetConfig into seqio's process-wide default (seqio/preprocessors/noise.h)
// Missing or ill-typed values throw t5x::gin::GinError naming the binding.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mesh/logical_axis_rules.h"
#include "t5x/checkpoints/restore_map.h"
#include "seqio/feature.h"
#include "seqio/feature_converters/feature_converters.h"
#include "t5x/gin/config.h"
#include "t5x/models/gin_model.h"
#include "t5x/models/models.h"
#include "t5x/optim/optimizer.h"
#include "t5x/optim/schedules.h"

namespace t5x::trainer {

struct DatasetConfig {
  std::string mixture_or_task_name;
  std::optional<seqio::SequenceLengths> task_feature_lengths;  // nullopt: None (measured maxima)
  std::string split = "train";
  int64_t batch_size = 1;  // GLOBAL batch size
  bool shuffle = false;
  std::optional<uint64_t> seed;
  bool use_cached = false;
  // Searched for caches when use_cached, before seqio's global ones: gin's
  // seqio.add_global_cache_dirs.global_cache_dirs (not a t5x DatasetConfig field).
  std::vector<std::string> cache_dirs;
  bool pack = false;
};

// The inference evaluator's gin settings (t5x passes seqio.Evaluator as
// inference_evaluator_cls): seqio.Evaluator.num_examples (EVALUATOR_NUM_EXAMPLES:
// the first N examples of each task, seqio's take(N); None or 0: all) and
// seqio.JSONLogger.write_n_results (JSON_WRITE_N_RESULTS: the first N
// predictions written to <task>-<step>.jsonl; None: all; 0: no file).
struct EvaluatorConfig {
  int64_t num_examples = 0;      // 0: all
  int64_t write_n_results = -1;  // -1: all
};

struct SaveCheckpointConfig {
  int64_t period = 0;      // 0: only at the end
  std::string dtype = "float32";
  int keep = 0;            // 0: keep all
};

struct RestoreCheckpointConfig {
  std::vector<std::string> paths;  // empty: nothing
  std::string mode = "latest";     // latest | specific
  std::string dtype;               // "" | float32 | bfloat16
  bool strict = true;
  bool fallback_to_scratch = false;
  // t5x's assignment_map: (regex, source path or None) over target paths
  // such as "state/param_states/.*" (t5x/checkpoints/restore_map.h).
  std::vector<AssignmentRule> assignment_map;
  // checkpointer_cls = @checkpoints.UpcycleCheckpointer() with num_experts = E
  // (t5x contrib/moe sparse upcycling; 0: the ordinary checkpointer): an
  // expert parameter [E, rest...] whose assigned checkpoint array is
  // [rest...] restores as E stacked copies (t5x/checkpoints/upcycle.h).
  int64_t upcycle_num_experts = 0;
};

struct PartitionerConfig {
  int64_t num_partitions = 1;
  std::vector<int64_t> model_parallel_submesh;
  // logical_axis_rules = @partitioning.standard_logical_axis_rules(...):
  // t5x's activation_partitioning_dims / parameter_partitioning_dims.
  int activation_partitioning_dims = 1;
  int parameter_partitioning_dims = 1;
  // standard_logical_axis_rules(additional_rules = [...]): appended to the
  // preset, so they apply to names the preset does not map.
  LogicalAxisRules additional_rules;
  // logical_axis_rules = [(logical name, mesh axis or None or a tuple of
  // axes), ...] written out: these rules instead of any preset.
  std::optional<LogicalAxisRules> explicit_rules;
  // Not in t5x: results bitwise independent of the `model` axis (no sum
  // split across devices; spmd::Context::mesh_invariant). Over `data` they
  // are when num_microbatches is a multiple of the data-axis size.
  bool mesh_invariant = true;
  // partitioning.MoePjitPartitioner.num_expert_partitions X (t5x contrib/moe,
  // moe.md 2.3); 0 for PjitPartitioner. With X: the mesh is Mesh::for_moe
  // (data, expert, model), the batch splits over ('expert', 'data'), the rules
  // are moe_logical_axis_rules, and the step runs with partial sums
  // (mesh_invariant defaults to False; True is refused). The reader refuses a
  // model whose network.T5Config.num_expert_partitions differs.
  int64_t num_expert_partitions = 0;
  std::string name = "partitioning.PjitPartitioner";  // the configurable, for messages
  bool moe() const { return num_expert_partitions > 0; }
};

// The partitioner's rules: the explicit list when one is bound, else
// standard_logical_axis_rules(activation dims, parameter dims,
// additional_rules), or moe_logical_axis_rules of the same for
// MoePjitPartitioner.
LogicalAxisRules logical_axis_rules(const PartitionerConfig& p);

// The model as gin describes it, read by the one model reader of every
// command (t5x/models/gin_model.h).
using t5x::ModelConfig;
using t5x::make_model;
using t5x::read_model_config;

struct OptimizerConfig {
  std::shared_ptr<const Optimizer> optimizer;
  LearningRateSchedule schedule;  // learning rate at step (before the update)
  // What the gin configured, for the startup line: e.g.
  // "optimizers.chain([optax.clip, optax.lion]), learning rate from optax.warmup_cosine_decay_schedule".
  std::string description;
};

struct TrainRunConfig {
  ModelConfig model;
  OptimizerConfig optimizer;
  std::string model_dir;
  DatasetConfig train_ds;
  std::optional<DatasetConfig> train_eval_ds;
  std::optional<DatasetConfig> infer_eval_ds;
  EvaluatorConfig evaluator;
  SaveCheckpointConfig save;
  RestoreCheckpointConfig restore;
  PartitionerConfig partitioner;
  int64_t total_steps = 0;
  std::optional<int64_t> relative_steps;
  int64_t eval_steps = 20;
  int64_t eval_period = 1000;
  int64_t stats_period = 0;  // 0: default (see trainer.h)
  std::optional<int64_t> random_seed;
  int64_t num_microbatches = 1;
  std::string trainer_class = "trainer.Trainer";  // train_script.train.trainer_cls (or trainer.MoeTrainer)
  bool run_eval_before_training = false;
};

struct EvalRunConfig {
  ModelConfig model;
  DatasetConfig dataset;
  EvaluatorConfig evaluator;
  RestoreCheckpointConfig restore;
  PartitionerConfig partitioner;
  std::string output_dir;
};

struct InferRunConfig {
  std::string mode = "predict";  // predict | score
  ModelConfig model;
  DatasetConfig dataset;
  RestoreCheckpointConfig restore;
  PartitionerConfig partitioner;
  std::string output_dir;
  int64_t checkpoint_period = 100;  // batches per output chunk
  int64_t shard_id = 0;
  int64_t num_shards = 1;
};

// With check_tasks false the tasks are neither looked up nor checked
// against the model's vocabulary: `t5x partition` needs only the model, the
// partitioner and TASK_FEATURE_LENGTHS (its batch is synthetic).
TrainRunConfig read_train_config(const gin::Config& cfg, bool check_tasks = true);
EvalRunConfig read_eval_config(const gin::Config& cfg);
InferRunConfig read_infer_config(const gin::Config& cfg);

// Pieces, exposed for tests and for the other modes.
OptimizerConfig read_optimizer_config(const gin::Config& cfg, const gin::Reference& model_ref);
DatasetConfig read_dataset_config(const gin::Config& cfg, const gin::Reference& ref);
// Throws std::invalid_argument naming the binding for a negative count.
EvaluatorConfig read_evaluator_config(const gin::Config& cfg);

// Warnings for a DatasetConfig with use_cached = True over tasks without a
// cache step (read from their source, as seqio does), one per task, naming
// the task and the fix.
std::vector<std::string> use_cached_warnings(const DatasetConfig& d);

// t5x's vocabulary check (utils.get_dataset raises "Model and Task
// vocabularies do not match"): the model's SentencePiece file
// (SENTENCEPIECE_MODEL_FILE) must exist and equal the targets vocabulary of
// every task behind `d` (same model bytes and extra_ids); tokens always come
// from the task, so a model vocabulary that differs would be ignored. Throws
// std::invalid_argument naming the gin binding and the path. A remote path
// (gs://...) cannot be read here: it returns a warning instead. An unknown
// task or mixture name throws seqio's error. The read_*_config functions call
// it for every DatasetConfig.
std::optional<std::string> check_model_vocabulary(const ModelConfig& m, const DatasetConfig& d);

// EncDecFeatureConverter for encoder-decoder models; for decoder-only models
// PrefixLMFeatureConverter when the task has "inputs", else LMFeatureConverter.
std::unique_ptr<seqio::FeatureConverter> make_feature_converter(const ModelConfig& m, bool pack,
                                                                bool task_has_inputs);

}  // namespace t5x::trainer
