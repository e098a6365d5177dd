// Sparse upcycling (Komatsuzaki et al. 2023, arXiv 2212.05055; t5x
// contrib/moe checkpoints.UpcycleCheckpointer and runs/sparse_upcycle.gin;
// moe.md 3): a dense t5x checkpoint becomes the checkpoint of an MoE model
// whose sparse layers replace the dense MLP of the same layer.
//
// Mapping (t5x's assignment_map of sparse_upcycle.gin):
//   target/<stack>/layers_i/mlp/expert/<k>/kernel [E, ...] <- E stacked copies of
//       target/<stack>/layers_i/mlp/<k>/kernel [...] (bitwise; the source dtype);
//   .../mlp/router/...                             <- fresh (given by the caller:
//       N(0, 0.02) from the model's init, as t5x's fallback_to_scratch does);
//   every other target/ array                      <- copied as stored;
//   state/param_states/...                         <- dropped: the optimizer
//       state starts fresh (t5x maps it to None).
// The step: kept by default. t5x restores the dense checkpoint's step (its
// assignment_map leaves state/step alone), so the learning-rate schedule
// continues; pass a step (e.g. 0) to restart it. No dataset state is written.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/zarr.h"

namespace t5x {

// dense [d...] -> [E, d...]: E copies of the bytes (any dtype).
HostTensor stack_experts(const HostTensor& dense, int64_t num_experts);

// t5x's UpcycleCheckpointer test for one parameter: an expert parameter
// (path contains "expert/") of shape [E, rest...] restores from a checkpoint
// array of shape [rest...] by stacking. True when that applies; false when
// the shapes are equal (an ordinary restore); throws CheckpointError naming
// both when an expert parameter fits neither (E != num_experts, or a
// geometry mismatch).
bool upcycle_applies(const std::string& target_path, const std::vector<int64_t>& target_shape,
                     const std::string& checkpoint_path, const std::vector<int64_t>& checkpoint_shape,
                     int64_t num_experts);

struct UpcycleParam {
  std::string name;                  // t5x param path without "target/"
  std::vector<int64_t> shape;        // the MoE model's shape
  std::optional<HostTensor> fresh;   // routers: the fresh value to write
};

struct UpcycleOptions {
  std::optional<int64_t> step;  // default: the dense checkpoint's step
  ZarrCompressor compressor{"gzip", 1};
  bool durable = true;
};

struct UpcycleResult {
  std::string dir;  // MODEL_DIR/checkpoint_<step>
  int64_t step = 0;
  int64_t stacked = 0;            // expert kernels made of E dense copies
  int64_t fresh = 0;              // router arrays freshly initialised
  int64_t copied = 0;             // other arrays copied
  int64_t dropped_optimizer = 0;  // state/param_states/ arrays left out
};

// Reads the dense checkpoint `ckpt_dir`, writes MODEL_DIR/checkpoint_<step>
// (atomically, as every converter: a temporary directory renamed). `params`:
// every parameter of the MoE model. Throws CheckpointError naming the array
// for: a model without expert parameters (not an MoE gin), a checkpoint that
// already has expert arrays, a missing source array, a shape that differs
// from the model's (geometry: d_model, d_ff, heads, vocab, layers), checkpoint
// parameters the model has no place for, and an existing output.
UpcycleResult upcycle_checkpoint(const std::string& ckpt_dir, const std::string& model_dir,
                                 const std::vector<UpcycleParam>& params, int64_t num_experts,
                                 const UpcycleOptions& opt);

}  // namespace t5x
