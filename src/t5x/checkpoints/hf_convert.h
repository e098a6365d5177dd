// Whole-checkpoint conversion between t5x checkpoints and Hugging Face T5
// directories (model.safetensors + config.json), the storage half of
// `t5x ckpt export-hf` / `import-hf`. Names and layouts: hf_t5.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "t5x/checkpoints/hf_t5.h"
#include "t5x/checkpoints/param_layout.h"
#include "t5x/checkpoints/zarr.h"

namespace t5x {

struct HfExportResult {
  HfT5Config config;
  int64_t num_tensors = 0;
  int64_t num_params = 0;
  std::vector<std::string> removed;  // stale weight files of an older export, removed from out_dir
};

// Reads every "target/..." array of the t5x checkpoint at `ckpt_dir`, maps it
// to transformers' T5 names (kernels transposed), and writes
// `<out_dir>/model.safetensors` (metadata {"format": "pt"}) and
// `<out_dir>/config.json` (inferred from the shapes). `dtype` ("float32",
// "bfloat16", "float16"; empty = as stored) casts the tensors. Throws
// CheckpointError for unreadable checkpoints, unmapped parameters and (float16)
// values beyond float16's range. Removes other weight files in `out_dir`
// (an older export's model.safetensors.index.json and shards, pytorch_model*.bin,
// ...), which transformers or import-hf could read instead. `layout`: how the
// checkpoint holds the parameters (scalable_t5's stacked layers and split
// heads, param_layout.h); they are read into the model's per-layer ones.
HfExportResult export_hf_t5(const std::string& ckpt_dir, const std::string& out_dir,
                            const std::string& dtype = "float32", const ParamLayout& layout = {});

struct HfImportOptions {
  int64_t step = 0;                      // state/step of the new checkpoint
  std::string dtype = "float32";         // target dtype ("" = as in the files)
  ZarrCompressor compressor{"gzip", 1};
  bool durable = true;
};

// The tensors of a Hugging Face model directory: `<hf_dir>/model.safetensors`,
// else (as transformers) every shard listed in model.safetensors.index.json.
// Throws CheckpointError for unreadable, malformed or non-regular files and a
// tensor in two shards.
NamedTensors read_hf_tensors(const std::string& hf_dir);

// Reads `<hf_dir>/config.json` and `<hf_dir>/model.safetensors` (or the shards
// listed in model.safetensors.index.json) and writes a t5x checkpoint
// `<model_dir>/checkpoint_<step>` holding "target/..." arrays (TensorStore,
// t5x's 64 MiB chunk rule) and "state/step". Returns the checkpoint dir.
// Shapes and tensor names are checked against config.json (missing or extra
// tensors, an MLP that disagrees with feed_forward_proj, layer_norm_epsilon
// other than 1e-6); non-float tensors are refused, float ones cast to
// opt.dtype (float64 to float32 with ""). The logits are what transformers 5
// computes (HfT5Config::scale_decoder_outputs): `resolved` gets the config with
// tie_word_embeddings = t5x's logits_via_embedding.
std::string import_hf_t5(const std::string& hf_dir, const std::string& model_dir,
                         const HfImportOptions& opt = {}, HfT5Config* resolved = nullptr);

}  // namespace t5x
