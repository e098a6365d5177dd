// The trainer's records read back from MODEL_DIR on a restart: the data
// position stored with each checkpoint and the last finished evaluation.
// Kept apart from the trainer (no model code) so that the fuzz harness
// fuzz/run_state_fuzzer.cpp can link them alone.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "seqio/batching.h"

namespace t5x::trainer {

// Where the training stream stands: the seed it was built with (a DatasetConfig
// seed of None draws one on the first run and keeps it, so a resumed run reads
// the same order) and the batched position. Stored as JSON next to each
// checkpoint (train_ds-<p>-of-<n>.json).
struct DataState {
  uint64_t seed = 0;
  uint64_t rng_seed = 0;  // the model's dropout / init seed (train.random_seed)
  seqio::BatchPosition position;
  bool operator==(const DataState&) const = default;
};
std::string data_state_to_json(const DataState& s);
// Throws seqio::DataError "<origin>: ..." naming the field (seeds are
// integers in [0, 2^64), counts in [0, 2^62]).
DataState data_state_from_json(const std::string& json, const std::string& origin = "data-position file");

// The last step whose evaluation during training finished, from
// MODEL_DIR/eval_completed.json ({"step": N}, replaced atomically after every
// output of that evaluation is written); nullopt when there is none. A run
// killed during its final evaluation has the final checkpoint but not this
// step, so the rerun evaluates again (t5x would skip it).
std::optional<int64_t> last_evaluated_step(const std::string& model_dir);
void record_evaluated_step(const std::string& model_dir, int64_t step);

}  // namespace t5x::trainer
