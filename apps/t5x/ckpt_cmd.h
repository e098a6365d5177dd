// `t5x ckpt ...`: checkpoint tools of the t5x command line.
//
//   t5x ckpt info PATH [--digest | --digest_only]
//   t5x ckpt export-hf CKPT OUT [--dtype=float32|bfloat16|float16] [--feed_forward_proj=P]
//       [--relative_attention_max_distance=N] [--dropout_rate=X] [--gin_file=F ...] [--gin.NAME=V ...]
//   t5x ckpt import-hf HF_DIR MODEL_DIR [--step=N] [--dtype=float32|bfloat16|""] [--compressor=gzip|zstd|raw]
//   t5x ckpt convert-gqa CKPT MODEL_DIR --num_kv_heads=G [--encoder_num_kv_heads=E] [--num_heads=H] [--step=N]
//       [--compressor=gzip|zstd|raw] [--gin_file=F ...]   (checkpoints/gqa_convert.h)
//
// PATH / CKPT is a checkpoint_<step> directory or a MODEL_DIR (its newest
// complete checkpoint). Exit status: 0 done, 1 error (message on stderr
// naming the file and a hint), 64 usage.
#pragma once
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "t5x/checkpoints/hf_t5.h"
#include "t5x/models/config.h"

namespace t5x::cli {

extern const char* const kCkptUsage;

// `args` are the words after "ckpt".
int run_ckpt_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// network.T5Config activations -> transformers' feed_forward_proj:
// ('gelu','linear') -> "gated-gelu", ('silu','linear') -> "gated-silu",
// ('relu',) -> "relu", ('gelu',) -> "gelu_new" (flax's tanh GELU), ...
// Throws std::invalid_argument for activations transformers' T5 cannot express.
std::string feed_forward_proj_from_activations(const std::vector<std::string>& acts);
// The inverse; "gelu" (exact erf GELU) maps to ('gelu',) with `*approx` set,
// as t5x only has the tanh form.
std::vector<std::string> activations_from_feed_forward_proj(const std::string& proj, bool* approx = nullptr);
// transformers' dense_act_fn for a feed_forward_proj (T5Config.__init__).
std::string dense_act_fn(const std::string& feed_forward_proj);

// The gin text of a model whose shapes match an HF T5 config: includes
// t5_1_1/base.gin (untied) or t5_1_0/base.gin (tied) and binds network.T5Config.
// A Switch config adds moe/moe.gin with its experts, top-1 routing, float32
// experts and the sparse layouts of sparse_layout_for_hf_config.
std::string model_gin_for_hf_config(const HfT5Config& c, const std::string& source);
// The (num_sparse_layers, flaxformer layout) giving exactly the layers
// transformers makes sparse in that stack (HfT5Config::hf_sparse_layer): MIXED
// for step 2 or 1, MIDDLE e.g. for 3 layers with 1 sparse. Throws
// CheckpointError "<where>: ..." when no layout does (e.g. step 4: HF 1, 5, 9
// vs MIXED 3, 7, 11).
std::pair<int64_t, T5Config::SparseLayout> sparse_layout_for_hf_config(const HfT5Config& c, bool encoder,
                                                                        const std::string& where);

}  // namespace t5x::cli
