// `t5x infer` / `t5x score` / `t5x eval` (t5x's infer.py and eval.py; t5x.md 8).
//
// infer: for every task of the DatasetConfig, one epoch of its split
// (shard shard_id/num_shards), predicted (or scored) in chunks of
// checkpoint_period batches. Under mpirun the processes form the
// partitioner's (data, model) mesh, as in training: parameters keep their
// logical_axis_rules layout (each process restores only its shards), every
// batch is split over 'data', and process 0 writes what one process writes
// (greedy decodes are one process's tokens, scores equal to rounding).
// Output, as t5x writes it:
//   OUTPUT_DIR/<task>-<mode>.jsonl-<shard:05>-of-<num:05>   one JSON per example:
//     {"inputs": {<feature>_pretokenized...}, "prediction": "<decoded text>"}   (predict)
//     {"inputs": {...}, "score": <log-likelihood>}                              (score)
//   OUTPUT_DIR/<that file>.COMPLETED                         when the task is done
//   OUTPUT_DIR/tmp-<that file>/<...>-chunk<NNNNN>            chunk files, merged at the end;
//     a chunk with its .COMPLETED marker is not recomputed when the run restarts.
// eval: the seqio Evaluator over the split (t5x eval.py), decoded on the
// mesh likewise, written by process 0 to OUTPUT_DIR/inference_eval (see
// evaluation.h).
#pragma once
#include <functional>
#include <iosfwd>
#include <map>
#include <string>

#include "t5x/trainer/distributed.h"
#include "t5x/trainer/run_config.h"

namespace t5x::trainer {

struct InferStats {
  int64_t examples = 0;        // written in this run
  int64_t chunks_skipped = 0;  // found complete from an earlier run
  std::map<std::string, std::string> outputs;  // task -> merged file
  // Parameter bytes this process holds (its shards on the mesh) and those
  // of the whole model.
  double param_bytes = 0, model_param_bytes = 0;
};

// `on_checked` runs on process 0 once the restore and every task's output
// settings have been accepted, before anything is written (the program
// writes config.gin there, so that a refused run leaves the directory as it
// was). Throws CheckpointError / seqio::DataError / std::invalid_argument, and
// std::runtime_error when INFER_OUTPUT_DIR holds another run's output.
InferStats run_infer(const InferRunConfig& cfg, const Distributed& dist, std::ostream* log = nullptr,
                     const std::function<void()>& on_checked = {});

// Returns task -> metrics.
std::map<std::string, std::map<std::string, double>> run_eval(const EvalRunConfig& cfg, const Distributed& dist,
                                                               std::ostream* log = nullptr);

}  // namespace t5x::trainer
