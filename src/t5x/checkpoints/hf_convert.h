// Whole-checkpoint conversion between t5x checkpoints and Hugging Face T5
// directories (model.safetensors + config.json), the storage half of
// `t5x ckpt export-hf` / `import-hf`. Names and layouts: hf_t5.h.
#pragma once
#include <cstdint>
#include <string>

#include "t5x/checkpoints/hf_t5.h"
#include "t5x/checkpoints/zarr.h"

namespace t5x {

struct HfExportResult {
  HfT5Config config;
  int64_t num_tensors = 0;
  int64_t num_params = 0;
};

// Reads every "target/..." array of the t5x checkpoint at `ckpt_dir`, maps it
// to transformers' T5 names (kernels transposed), and writes
// `<out_dir>/model.safetensors` (metadata {"format": "pt"}) and
// `<out_dir>/config.json` (inferred from the shapes). `dtype` ("float32",
// "bfloat16", "float16"; empty = as stored) casts the tensors. Throws
// CheckpointError for unreadable checkpoints and unmapped parameters.
HfExportResult export_hf_t5(const std::string& ckpt_dir, const std::string& out_dir,
                            const std::string& dtype = "float32");

struct HfImportOptions {
  int64_t step = 0;                      // state/step of the new checkpoint
  std::string dtype = "float32";         // target dtype ("" = as in the files)
  ZarrCompressor compressor{"gzip", 1};
  bool durable = true;
};

// The tensors of a Hugging Face model directory: `<hf_dir>/model.safetensors`,
// or every shard listed in model.safetensors.index.json. Throws CheckpointError
// for unreadable or malformed files.
NamedTensors read_hf_tensors(const std::string& hf_dir);

// Reads `<hf_dir>/config.json` and `<hf_dir>/model.safetensors` (or the shards
// listed in model.safetensors.index.json) and writes a t5x checkpoint
// `<model_dir>/checkpoint_<step>` holding "target/..." arrays (TensorStore,
// t5x's 64 MiB chunk rule) and "state/step". Returns the checkpoint dir.
// Shapes are checked against config.json.
std::string import_hf_t5(const std::string& hf_dir, const std::string& model_dir,
                         const HfImportOptions& opt = {});

}  // namespace t5x
