// Mesh-TensorFlow T5 variable names -> t5x state paths, as t5x's importer
// does it (t5x/checkpoint_importer.py: `t5_importer` rules, SLOT_MAP,
// TOWER_MAP, _add_missing_param_states, _maybe_correct_relpos_bias). Names and
// shapes: ../shared/reference/meshtf-checkpoints.md §4-5.
//
// Rules (full match, first wins; `S` is the slot suffix: "" -> target/...,
// _slot_v -> .../v, _slot_vr -> .../v_row, _slot_vc -> .../v_col under
// state/param_states/; any other suffix, e.g. _slot_m, is unmapped):
//   global_step                                  -> state/step (int64 -> int32)
//   shared/embedding S                           -> token_embedder/embedding
//   T/embedding S                                -> T/token_embedder/embedding
//   T/block_N/layer_000/SelfAttention/relative_attention_bias S
//                                                -> T/layers_N/relpos_bias/rel_embedding
//   T/block_N/layer_K/(SelfAttention|EncDecAttention)/(q|k|v|o) S
//       -> T/layers_N/(attention | self_attention | encoder_decoder_attention)/(query|key|value|out)/kernel
//   T/block_N/layer_K/DenseReluDense/(wi|wo)[_j]/kernel S -> T/layers_N/mlp/(wi|wo)[_j]/kernel
//   T/block_N/layer_K/(layer_norm|rms_norm)/scale S
//       encoder K=0,1: pre_attention_layer_norm, pre_mlp_layer_norm
//       decoder K=0,1,2: pre_self_attention_, pre_cross_attention_, pre_mlp_layer_norm
//       transformer K=0,1: pre_self_attention_layer_norm, pre_mlp_layer_norm
//   T/(final_layer_norm|rms_norm)/scale S        -> T/(encoder_norm|decoder_norm)/scale
//   (decoder|transformer)/logits/kernel S        -> decoder/logits_dense/kernel
// T is encoder, decoder or transformer (written as decoder, TOWER_MAP). N is
// the block number without zero padding. Arrays keep their shapes (kernels
// are [in, out] in both); no transposes.
//
// After mapping: when no relpos bias sits above layers_0 (Mesh-TF's shared
// bias lives in block_000 only), `layers_0/relpos_bias` becomes the stack's
// `relpos_bias`. Then t5x's Adafactor placeholders, (1,) float32 zeros: `m`
// for every parameter, `v_row` and `v_col` where `v` is present, `v` where
// `v_row` is present.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/tf_bundle.h"

namespace t5x {

// The t5x path of one Mesh-TF name before the relpos correction, or nullopt
// when no rule matches (or the slot suffix is not one of SLOT_MAP's).
std::optional<std::string> meshtf_to_t5x_path(const std::string& tf_name);

struct MeshTfImport {
  std::map<std::string, HostTensor> leaves;              // t5x path -> array
  std::map<std::string, std::string> source;             // t5x path -> TF name ("" = placeholder)
};

// Maps every name of the bundle and reads its tensor (CRCs checked). Throws
// CheckpointError "<index>: Unmapped tensor keys exist: 'a', 'b'" listing every
// name no rule maps, and for two names mapping to one path.
MeshTfImport import_meshtf(const tf::TfBundleReader& r);

}  // namespace t5x
