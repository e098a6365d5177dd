// Evaluation during training and in `t5x eval` (t5x.md 8 "Evaluation"):
//   - teacher-forced: the model's loss_fn metrics over eval_steps batches of
//     each task of the train_eval DatasetConfig (MODEL_DIR/training_eval/<task>);
//   - inference: the seqio Evaluator over the infer_eval DatasetConfig:
//     predict_batch -> decode -> postprocess -> the task's metrics (BLEU, ...),
//     written to <dir>/<task>/ event files (tags "eval/<metric>"),
//     <dir>/<task>-metrics.jsonl and <dir>/<task>-<step:06>.jsonl (input,
//     target, prediction), as seqio's TensorBoard and JSON loggers.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "mesh/logical_axis_rules.h"
#include "nn/constraint.h"
#include "seqio/evaluation.h"
#include "spmd/context.h"
#include "spmd/dispatch.h"
#include "t5x/trainer/distributed.h"
#include "t5x/trainer/run_config.h"
#include "t5x/trainer/run_state.h"  // last_evaluated_step, record_evaluated_step

namespace t5x::trainer {

// While alive, model code runs on `dist`'s whole (data, model) mesh (on
// more than one process; nothing otherwise): dist.spmd is the spmd context,
// its lowering is installed, and every activation the model constrains takes
// its layout from `rules` -- also those made from host values, the decode
// step's tokens and the empty KV cache (batch -> 'data', heads -> 'model').
// So decoding runs with the parameters in their sharded layout and each
// process computes (and caches) only its rows and heads.
class MeshScope {
 public:
  MeshScope(const Distributed& dist, const LogicalAxisRules& rules);
  ~MeshScope();
  MeshScope(const MeshScope&) = delete;
  MeshScope& operator=(const MeshScope&) = delete;

 private:
  std::optional<spmd::ContextScope> context_;
  std::optional<spmd::InstallScope> lowering_;
  std::optional<nn::ActivationConstraintScope> constraint_;
};

// `b`, whole on every process (every process reads the same batches), as a
// global batch of `dist`'s mesh: zero rows appended up to a multiple of
// |data| (no loss weight; callers drop their outputs), every feature split
// over 'data'. On one process `b` itself.
Batch mesh_batch(const Batch& b, const Distributed& dist);

// score_batch of `features`' rows under a MeshScope: the log-likelihood of
// each row, all of them on every process (the padding rows dropped).
std::vector<double> score_rows(const BaseTransformerModel& model, const ParamTree& params, const Batch& features,
                               const Distributed& dist);
// predict_batch's best decode of each row of `features` (model features;
// see prediction_batch) under a MeshScope, trimmed by trim_decoded: all rows
// on every process. Greedy decoding gives one process's tokens.
std::vector<std::vector<int32_t>> predict_rows(const BaseTransformerModel& model, const ModelConfig& mcfg,
                                               const ParamTree& params, const Batch& features,
                                               const Distributed& dist);

// Teacher-forced metrics per task (all processes take part; values are
// summed over the data group). Tasks without the split are skipped.
std::map<std::string, std::map<std::string, double>> evaluate_teacher_forced(
    const BaseTransformerModel& model, const ModelConfig& mcfg, const ParamTree& params, const DatasetConfig& cfg,
    int64_t eval_steps, const Distributed& dist);

// seqio Evaluator over `cfg` (one epoch of its split, unshuffled).
class InferenceEvaluator {
 public:
  InferenceEvaluator(const DatasetConfig& cfg, const ModelConfig& mcfg, const EvaluatorConfig& ecfg = {});
  bool empty() const { return evaluator_->task_names().empty(); }
  // Runs every task; writes summaries under `out_dir` when it is non-empty.
  // On several processes every process runs it (under a MeshScope), on the
  // same batches, each split over 'data' (predict_rows); pass `out_dir`
  // on process 0 only.
  // `progress` (optional) receives lines "inference_eval step S: batch b/B,
  // n examples, x examples/s, ETA m:ss" at the first batch, whenever another
  // tenth of the batches is done or 30 s have passed, and at the last batch:
  // decoding a whole split takes minutes and would otherwise print nothing.
  std::map<std::string, seqio::TaskEvalResult> run(
      const BaseTransformerModel& model, const ParamTree& params, const Distributed& dist, int64_t step,
      const std::string& out_dir, const std::function<void(const std::string&)>& progress = nullptr) const;

 private:
  DatasetConfig cfg_;
  ModelConfig mcfg_;
  EvaluatorConfig ecfg_;
  std::unique_ptr<seqio::Evaluator> evaluator_;
};

// Decoded tokens of one predict_batch row: up to (excluding) the first EOS
// (id 1) and without padding.
std::vector<int32_t> trim_decoded(const std::vector<int64_t>& row, int32_t eos_id = 1);

// predict_batch input for model-feature batches: enc-dec decoding starts from
// empty targets (t5x zeroes decoder_input_tokens unless prompting with targets).
Batch prediction_batch(const Batch& features, bool decoder_only);

}  // namespace t5x::trainer
