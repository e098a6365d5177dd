// A model's parameters and optimizer slots as a checkpoint lays them out,
// where that differs from the model's own names and shapes: t5x's
// scalable_t5 network (t5x/examples/scalable_t5/network.py, layers.py).
//
// The model always computes on one parameter per layer with joined heads:
// `encoder/layers_3/attention/query/kernel` [embed, joined_kv]. scalable_t5's
// checkpoints hold instead
// - attention kernels with separate heads and kv dims (its DenseGeneral with
//   features (num_heads, head_dim)): query / key / value [embed, heads, kv],
//   out [heads, kv, embed];
// - with `scan_layers` (flax's nn.scan over the layer, `scan_with_axes`),
//   each layer parameter stacked along a 'layers' dim inserted at
//   `param_scan_axis`, under `<stack>/<stack>/`:
//   `encoder/encoder/attention/query/kernel` [embed, layers, heads, kv],
//   `encoder/encoder/pre_attention_layer_norm/scale` [embed, layers] (the
//   layout transformers' convert_umt5_checkpoint_to_pytorch.py reads, `[:, i]`).
// Optimizer slots follow their stacked parameter as t5x's optimizer builds
// them for it: Adafactor under logical factor rules keeps 'layers' as a
// BATCH dim, so `v_row` of the stacked query is [embed, layers] and `v_col`
// [layers, heads, kv]; the slot a model slot maps to is the one that keeps
// the same dims (the out kernel's model v_row, over joined_kv, is the
// checkpoint's v_col).
//
// Every model leaf maps to a box of one checkpoint array whose dims, taken
// in order, flatten into the model leaf's dims: reading a layer is one box
// read and a reshape; saving stacks the layers' (equally split) shards.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "t5x/checkpoints/checkpoint_dir.h"

namespace t5x {

// Where one model leaf ("target/<param>" or "state/param_states/<param>/<slot>")
// lies in the checkpoint.
struct LeafPlace {
  std::string path;                      // checkpoint leaf path
  std::vector<int64_t> shape;            // the checkpoint array's whole shape
  std::vector<std::string> axes;         // its logical axis names (parameters only)
  std::vector<std::vector<int>> groups;  // model dim d = checkpoint dims groups[d], flattened in order
  int layer_axis = -1;                   // the checkpoint dim indexed by the layer; -1: not stacked
  int64_t layer = 0;
  bool whole = false;                    // a placeholder slot: every layer's is the checkpoint's whole leaf
};

// A model parameter given to the layout: its name (without "target/"),
// shape and logical axis names.
struct LayoutParam {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<std::string> axes;
};

// The param dims each optimizer slot of a parameter keeps, in order, by slot
// name ("v_row" -> {0}); nullopt for a placeholder (t5x's (1,) zeros).
// Called with the model's parameter and with the checkpoint's (stacked,
// split-heads) one, with their axis names. Throws what the optimizer throws
// when it cannot hold such a parameter.
using SlotDims = std::map<std::string, std::optional<std::vector<int>>>;
using SlotDimsFn =
    std::function<SlotDims(const std::string& name, const std::vector<int64_t>& shape, const std::vector<std::string>& axes)>;

struct ScalableT5Layout {
  bool scan_layers = false;
  int param_scan_axis = 1;  // 0 or 1 (every layer parameter has rank >= 1)
  int64_t head_dim = 0;     // splits joined_kv into [heads, kv]
};

// Whether scalable_t5's layout stores the model parameter `name` of rank
// `rank` other than as the model holds it: with scan_layers every layer
// parameter (`<stack>/layers_i/...`, stacked), else the attention kernels
// (heads split). t5x's Adafactor factors exactly these by their logical rule
// whatever their sizes (their checkpoint form has a BATCH dim or rank 3),
// where it sizes up the model's other matrices (AdafactorConfig::factor_by_rule).
bool scalable_t5_relaid(const std::string& name, size_t rank, bool scan_layers);

class ParamLayout {
 public:
  ParamLayout() = default;  // the identity: the checkpoint holds the model's leaves as they are

  // scalable_t5's layout over `params`. `slot_dims` empty: parameters only
  // (a restore without optimizer state). Throws CheckpointError naming the
  // parameter when a layer is missing, a kernel's joined dim is not a
  // multiple of head_dim, or the optimizer's slots of the stacked parameter
  // do not hold the model's (e.g. Adafactor without logical_factor_rules,
  // which t5x refuses too for parameters of rank above 2).
  static ParamLayout scalable_t5(const std::vector<LayoutParam>& params, const ScalableT5Layout& opt,
                                 const SlotDimsFn& slot_dims);

  bool identity() const { return places_.empty(); }  // (scalable_t5's with nothing to map)
  // nullptr: the leaf is stored under its own path and shape.
  const LeafPlace* find(const std::string& model_path) const;

  // Whether the checkpoint holds the model leaf.
  bool has(const CheckpointReader& r, const std::string& model_path) const;
  // The model leaf's box (nullopt: whole) of global shape `expected`, read
  // from its checkpoint array. CheckpointError when that array's shape is
  // not the layout's ("Shape of `<checkpoint path>` ... (the layout of
  // `<model path>`)"), or when the box splits a head. A checkpoint holding
  // the leaf under its own path and shape is read as it is (a per-layer
  // checkpoint with joined heads, as t5x.cpp wrote scalable_t5 before).
  HostTensor read(const CheckpointReader& r, const std::string& model_path, const std::vector<int64_t>& expected,
                  const std::optional<IndexBox>& box, std::string_view cast_to = "") const;
  // The model leaf's global shape where the layout stores it otherwise
  // (nullopt: as stored).
  std::optional<std::vector<int64_t>> model_shape(const std::string& model_path) const;
  // The checkpoint's parameters (names without "target/", whole shapes,
  // logical axes) in the order of the model's `params`, a stacked one once:
  // what t5x's model-info.txt lists for this layout.
  std::vector<LayoutParam> checkpoint_params(const std::vector<LayoutParam>& params) const;
  // The checkpoint's array paths in model names (a stacked array stands for
  // its layers' leaves).
  std::vector<std::string> model_paths(const std::vector<std::string>& checkpoint_paths) const;
  // Where the checkpoint lacks a model leaf or holds it in another shape:
  // the layout its leaves show, and the binding that reads it ("" when the
  // checkpoint is not in another of these layouts). E.g. a stacked
  // `encoder/encoder/...` for a model without scan_layers: "bind
  // network.T5Config.scan_layers = True"; a query kernel [embed, heads, kv]
  // for T5's network: scalable_t5's network.
  std::string hint(const CheckpointReader& r, const std::string& model_path) const;
  // The model's leaves as the checkpoint's: leaves of one stacked array are
  // stacked (every layer must be there, split alike), heads split, a
  // placeholder slot kept once. Other leaves pass through.
  std::vector<SaveLeaf> to_checkpoint(std::vector<SaveLeaf> leaves) const;

 private:
  std::optional<ScalableT5Layout> scalable_;                // nullopt: the identity
  std::map<std::string, LeafPlace> places_;                 // model path -> place
  std::map<std::string, std::vector<std::string>> members_;  // checkpoint path -> model paths, by layer
};

}  // namespace t5x
