// `t5x ckpt import-tf`: a TensorFlow (Mesh-TF T5) checkpoint prefix -> a t5x
// checkpoint, as t5x's scripts/convert_tf_checkpoint.py (names:
// meshtf_mapping.h; format: tf_bundle.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "t5x/checkpoints/zarr.h"

namespace t5x {

struct TfImportOptions {
  std::optional<int64_t> step;        // default: the checkpoint's global_step (else 0)
  std::string dtype = "float32";      // target/ dtype, as convert_tf_checkpoint's save_dtype ("" = keep)
  ZarrCompressor compressor{"gzip", 1};
  bool durable = true;
};

struct TfImportResult {
  std::string dir;          // MODEL_DIR/checkpoint_<step>
  int64_t step = 0;
  int64_t num_params = 0, num_slots = 0, num_placeholders = 0;
};

// Reads every tensor (CRCs checked), maps the names and writes
// MODEL_DIR/checkpoint_<step>: "target/..." and the Adafactor slots as zarr
// arrays (t5x's 64 MiB chunk rule), "state/step" and (1,) placeholders inline.
// Throws CheckpointError (bad files, unmapped names, an existing step).
TfImportResult import_tf_checkpoint(const std::string& prefix, const std::string& model_dir,
                                    const TfImportOptions& opt = {});

}  // namespace t5x
