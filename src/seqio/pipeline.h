// Internal: the block pipeline behind Task::get_dataset (see dataset.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "seqio/dataset.h"
#include "seqio/preprocessor.h"
#include "seqio/sources.h"

namespace seqio::internal {

struct PipelineStep {
  int index;          // position in the task's preprocessor list (seed derivation)
  bool post_cache;    // epoch enters the seed; sequence lengths visible
  Preprocessor pp;
};

struct PipelineSpec {
  std::string task_name;
  std::shared_ptr<const DataSource> source;
  OutputFeatures output_features;
  std::vector<PipelineStep> steps;
  bool validate = true;    // check/trim output features after the last step
  bool emit_keys = false;  // add each example's key as int64 feature "_seqio_key"
};

std::unique_ptr<Dataset> make_pipeline(PipelineSpec spec, const DatasetOptions& options);

// Fisher-Yates permutation of [0, n) from a counter-based generator.
std::vector<size_t> permutation(size_t n, uint64_t seed);

// Key of record `record` in file `file` (raw keys have the top bit clear).
inline uint64_t raw_key(uint64_t file, uint64_t record) { return (file << 40) | record; }

}  // namespace seqio::internal
