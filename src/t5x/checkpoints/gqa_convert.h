// Uptraining conversion of a multi-head t5x checkpoint to grouped-query /
// multi-query attention (Ainslie et al. 2023, "GQA", section 2.1; moe.md
// 4.5): the storage half of `t5x ckpt convert-gqa`.
//
// For every attention module whose K/V heads change (decoder self- and
// cross-attention, and the decoder-only model's self-attention, to
// `num_kv_heads`; the encoder's attention to `encoder_num_kv_heads` when
// given), the key and value kernels [embed, joined_kv = H*head_dim] become
// [embed, kv_heads = G, kv = head_dim] with K_g = the float32 mean of the
// kernels of heads g*H/G .. (g+1)*H/G - 1 (consecutive heads form a group,
// as nn/attention.h reads them), stored in the source dtype. Every other
// `target/` array is copied as stored. The optimizer state
// (`state/param_states/...`) is dropped, so `t5x train` starts it fresh (as
// t5x's sparse upcycling does): the pooled kernels have no second-moment
// history, and Adafactor's factored statistics of the others would be
// restored next to a reset one. The step is kept (the learning-rate schedule
// continues, the paper's "continue pre-training"); no dataset state is
// written, so the data stream starts at its beginning.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "t5x/checkpoints/zarr.h"

namespace t5x {

struct GqaConvertOptions {
  int64_t num_heads = 0;             // H of the source model (required)
  int64_t num_kv_heads = 0;          // G of the decoder attention (required; H keeps it multi-head)
  int64_t encoder_num_kv_heads = 0;  // G of the encoder attention; 0 = keep multi-head
  std::optional<int64_t> step;       // default: the source checkpoint's step
  ZarrCompressor compressor{"gzip", 1};
  bool durable = true;
};

struct GqaConvertResult {
  std::string dir;                 // MODEL_DIR/checkpoint_<step>
  int64_t step = 0;
  int64_t pooled = 0;              // key / value kernels mean-pooled
  int64_t copied = 0;              // other target/ arrays
  int64_t dropped_optimizer = 0;   // state/param_states/ arrays left out
};

// Reads the t5x checkpoint `ckpt_dir` and writes MODEL_DIR/checkpoint_<step>.
// Throws std::invalid_argument "[convert-gqa] ..." for a G that does not
// divide H, and CheckpointError naming the array for a key / value kernel
// that is not [embed, H * head_dim] (e.g. already grouped), for a relative
// position bias [heads, buckets] whose heads are not H (a wrong --num_heads),
// for a checkpoint without target/ arrays, and for an existing output.
GqaConvertResult convert_gqa_checkpoint(const std::string& ckpt_dir, const std::string& model_dir,
                                        const GqaConvertOptions& opt);

// The pooling alone: w [embed, H * head_dim] (float32 values, C order) ->
// [embed, G, head_dim].
std::vector<float> mean_pool_kv_heads(const std::vector<float>& w, int64_t embed, int64_t num_heads,
                                      int64_t head_dim, int64_t num_kv_heads);

}  // namespace t5x
