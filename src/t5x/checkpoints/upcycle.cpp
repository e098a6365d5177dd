#include "t5x/checkpoints/upcycle.h"

#include <regex>
#include <set>

#include "t5x/checkpoints/checkpoint_dir.h"

namespace t5x {

namespace {

std::string shape_text(const std::vector<int64_t>& s) { return HostTensor{"float32", s, {}}.shape_string(); }

bool is_expert(const std::string& path) { return path.find("expert/") != std::string::npos; }

}  // namespace

HostTensor stack_experts(const HostTensor& dense, int64_t num_experts) {
  if (num_experts < 1) throw std::invalid_argument("[upcycle] num_experts must be >= 1, got " + std::to_string(num_experts));
  HostTensor out;
  out.dtype = dense.dtype;
  out.shape = dense.shape;
  out.shape.insert(out.shape.begin(), num_experts);
  out.data.reserve(dense.data.size() * size_t(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) out.data.insert(out.data.end(), dense.data.begin(), dense.data.end());
  return out;
}

bool upcycle_applies(const std::string& target_path, const std::vector<int64_t>& target_shape,
                     const std::string& checkpoint_path, const std::vector<int64_t>& checkpoint_shape,
                     int64_t num_experts) {
  if (!is_expert(target_path) || target_shape == checkpoint_shape) return false;
  const std::vector<int64_t> rest(target_shape.empty() ? target_shape.begin() : target_shape.begin() + 1,
                                  target_shape.end());
  if (!target_shape.empty() && rest == checkpoint_shape && target_shape[0] == num_experts) return true;
  std::string why;
  if (!target_shape.empty() && rest == checkpoint_shape)
    why = "the model has " + std::to_string(target_shape[0]) + " experts but num_experts = " +
          std::to_string(num_experts) + "\n  hint: set the upcycling num_experts to the model's NUM_EXPERTS";
  else
    why = "the dense array's shape is not the expert shape without its leading expert dim\n  hint: the MoE "
          "model's dense geometry (emb_dim, mlp_dim / expert_mlp_dim, activations) must be the checkpoint's";
  throw CheckpointError("[upcycle] `" + target_path + "` " + shape_text(target_shape) + " cannot be upcycled from `" +
                        checkpoint_path + "` " + shape_text(checkpoint_shape) + ": " + why);
}

UpcycleResult upcycle_checkpoint(const std::string& ckpt_dir, const std::string& model_dir,
                                 const std::vector<UpcycleParam>& params, int64_t num_experts,
                                 const UpcycleOptions& opt) {
  static const std::regex expert_rx(R"((.*)/mlp/expert/(.*))");
  bool any_expert = false;
  for (const auto& p : params) any_expert |= std::regex_match(p.name, expert_rx);
  if (!any_expert)
    throw CheckpointError("[upcycle] the model has no expert parameters (no sparse layers)\n  hint: give an MoE model "
                          "gin (e.g. configs/models/moe/mini.gin: NUM_EXPERTS and NUM_*_SPARSE_LAYERS > 0)");
  CheckpointReader r = CheckpointReader::open(ckpt_dir);
  UpcycleResult res;
  res.step = opt.step ? *opt.step : r.step().value_or(0);
  std::set<std::string> used;
  std::vector<SaveLeaf> leaves;
  for (const auto& p : params) {
    const std::string tp = "target/" + p.name;
    if (p.fresh) {
      if (p.fresh->shape != p.shape)
        throw CheckpointError("[upcycle] fresh value of `" + tp + "` has shape " + p.fresh->shape_string());
      leaves.push_back(SaveLeaf::whole(tp, *p.fresh));
      ++res.fresh;
      continue;
    }
    std::smatch m;
    const bool expert = std::regex_match(p.name, m, expert_rx);
    const std::string src = expert ? "target/" + m[1].str() + "/mlp/" + m[2].str() : tp;
    if (r.has(tp) && expert)
      throw CheckpointError("[upcycle] " + r.dir() + " already has expert arrays (`" + tp +
                            "`)\n  hint: upcycle a dense checkpoint; an MoE checkpoint restores as it is");
    if (!r.has(src))
      throw CheckpointError("[upcycle] " + r.dir() + " has no `" + src + "` (for `" + tp +
                            "`)\n  hint: the MoE model's dense part (layers, names) must be the checkpoint's model");
    const auto have = r.info(src).shape;
    used.insert(src);
    if (expert && upcycle_applies(tp, p.shape, src, have, num_experts)) {
      leaves.push_back(SaveLeaf::whole(tp, stack_experts(r.read(src), num_experts)));
      ++res.stacked;
      continue;
    }
    if (have != p.shape)
      throw CheckpointError("[upcycle] `" + src + "` is " + shape_text(have) + " in " + r.dir() + " but the model's `" +
                            tp + "` is " + shape_text(p.shape) +
                            "\n  hint: the MoE gin's dense geometry (vocab, emb_dim, heads, mlp_dim) must be the "
                            "checkpoint's");
    leaves.push_back(SaveLeaf::whole(tp, r.read(src)));
    ++res.copied;
  }
  std::string unused;
  for (const auto& path : r.array_paths()) {
    if (path.rfind("state/param_states/", 0) == 0) ++res.dropped_optimizer;
    if (path.rfind("target/", 0) == 0 && !used.count(path)) unused += (unused.empty() ? "" : ", ") + path;
  }
  if (!unused.empty())
    throw CheckpointError("[upcycle] " + r.dir() + " has parameters the MoE model has no place for: " + unused +
                          "\n  hint: the model gin must be the dense checkpoint's model with sparse layers "
                          "(same layers, attention, vocabulary)");
  res.dir = save_converted_checkpoint(model_dir, res.step, std::move(leaves), opt.compressor, opt.durable);
  return res;
}

}  // namespace t5x
