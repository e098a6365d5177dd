#include "t5x/optim/grad_utils.h"

#include <cmath>
#include <optional>
#include <vector>

#include "backend/kernels.h"
#include "ops/shape.h"

namespace t5x {

namespace {
// The kernels read f32, bf16 and f16 gradients as they are.
void check_float(const char* op, const std::string& key, const Array& g) {
  if (g.dtype() != DType::f32 && g.dtype() != DType::bf16 && g.dtype() != DType::f16)
    throw_invalid(op, "gradient '" + key + "' is " + dtype_name(g.dtype()) + "; expected float32, bfloat16 or float16");
}

// sum(g^2) of the local buffer in float64, in the kernel's fixed order: the
// same bits on any thread count and CPU.
double local_sum_of_squares(const std::string& key, const Array& g) {
  check_float("global_norm", key, g);
  return kernels::cpu::sum_of_squares(g.dtype(), g.raw_data(), g.local_size());
}
}  // namespace

double global_norm(const ParamTree& grads) {
  for (const auto& [k, g] : grads)
    if (!g.is_fully_local())
      throw_invalid("global_norm", "'" + k + "' is sharded; the global norm needs a cross-shard sum (pass a ShardComm)");
  return global_norm(grads, nullptr);
}

double global_norm(const ParamTree& grads, const ShardComm* comm) {
  double total = 0.0;
  std::map<std::vector<std::string>, double> split;  // per set of mesh axes
  for (const auto& [k, g] : grads) {
    if (g.is_fully_local()) {
      total += local_sum_of_squares(k, g);
      continue;
    }
    if (!comm) throw_invalid("global_norm", "'" + k + "' is split across processes and no ShardComm was given");
    split[split_axes(g)] += local_sum_of_squares(k, g);
  }
  // Every process holds the same keys, so the sums line up (map order).
  for (auto& [axes, s] : split) {
    comm->sum(axes, &s, 1);
    total += s;
  }
  return std::sqrt(total);
}

ParamTree grads_to_clip(const ParamTree& params, const ParamTree& grads, const ShardComm* comm, const char* op) {
  ParamTree g;
  for (const auto& [path, p] : params) {
    g[path] = grads.at(path);
    if (!g[path].is_fully_local() && !comm)
      throw_invalid(op, "gradient of '" + path + "' is split across processes; clip_by_global_norm needs the "
                        "run's ShardComm (spmd::shard_comm()) passed to apply_gradient");
  }
  return g;
}

void check_chained_clips(const ChainedClips& clips, const char* op) {
  for (const auto& c : clips)
    if (!(std::isfinite(c.threshold) && c.threshold > 0.0))
      throw_invalid(op, std::string(c.kind == ChainedClip::Kind::kGlobalNorm ? "optax.clip_by_global_norm's max_norm"
                                                                              : "optax.clip's max_delta") +
                            " must be finite and > 0, got " + std::to_string(c.threshold));
}

std::string chain_state_prefix(const ChainedClips& clips) {
  return clips.empty() ? "" : std::to_string(clips.size()) + "/";
}

namespace {
// Every gradient through `c` into new arrays (f32, bf16 or f16, rounded once).
ParamTree clip_all(const ParamTree& grads, const kernels::GradClip& c, const char* op) {
  if (!c.any()) return grads;
  ParamTree out;
  for (const auto& [k, g] : grads) {
    check_float(op, k, g);
    Array r(g.shape(), g.dtype(), g.sharding());
    kernels::cpu::clip_grads(g.dtype(), g.raw_data(), g.local_size(), c, r.raw_data());
    out[k] = r;
  }
  return out;
}

// One clip as a GradClip; the global norm is taken over `grads` as they are.
kernels::GradClip one_clip(const ChainedClip& clip, const ParamTree& grads, const ShardComm* comm) {
  kernels::GradClip c;
  if (clip.kind == ChainedClip::Kind::kValue) {
    c.clamp = true, c.max_delta = float(clip.threshold);
  } else {
    // optax: where(g_norm < max_norm, g, (g / g_norm) * max_norm), float32.
    c.norm = float(global_norm(grads, comm));
    c.max_norm = float(clip.threshold);
    c.scale = !(c.norm < c.max_norm);
  }
  return c;
}
}  // namespace

PreparedClips prepare_chained_clips(const ChainedClips& clips, const ParamTree& params, const ParamTree& grads,
                                    const ShardComm* comm, const char* op) {
  PreparedClips out;
  if (clips.empty()) {
    out.grads = grads;
    return out;
  }
  check_chained_clips(clips, op);
  out.grads = grads_to_clip(params, grads, comm, op);
  // The tail the kernels fuse: [clip_by_global_norm][clip], in that order.
  size_t tail = clips.size();
  if (tail > 0 && clips[tail - 1].kind == ChainedClip::Kind::kValue) --tail;
  if (tail > 0 && clips[tail - 1].kind == ChainedClip::Kind::kGlobalNorm) --tail;
  for (size_t i = 0; i < tail; ++i) out.grads = clip_all(out.grads, one_clip(clips[i], out.grads, comm), op);
  for (size_t i = tail; i < clips.size(); ++i) {
    const kernels::GradClip c = one_clip(clips[i], out.grads, comm);
    if (c.scale) out.fused.scale = true, out.fused.norm = c.norm, out.fused.max_norm = c.max_norm;
    if (c.clamp) out.fused.clamp = true, out.fused.max_delta = c.max_delta;
  }
  // Other dtypes get the fused tail in a copy, so that the kernel leaves them be.
  for (auto& [k, g] : out.grads)
    if (g.dtype() != DType::f32) g = clip_all({{k, g}}, out.fused, op).at(k);
  return out;
}

ParamTree clip_by_global_norm(const ParamTree& grads, double max_norm) {
  return clip_by_global_norm(grads, max_norm, global_norm(grads));
}

ParamTree clip_by_global_norm(const ParamTree& grads, double max_norm, double global) {
  const float norm = float(global);
  ParamTree out;
  const bool keep = norm < float(max_norm);
  for (const auto& [k, g] : grads) {
    if (keep) {
      out[k] = g;
      continue;
    }
    check_float("clip_by_global_norm", k, g);
    kernels::GradClip c;
    c.scale = true, c.norm = norm, c.max_norm = float(max_norm);
    Array r(g.shape(), g.dtype(), g.sharding());
    kernels::cpu::clip_grads(g.dtype(), g.raw_data(), g.local_size(), c, r.raw_data());
    out[k] = r;
  }
  return out;
}

std::map<std::string, Array> get_microbatch(const std::map<std::string, Array>& batch, int64_t index,
                                            int64_t num_microbatches, const std::string& batch_dim) {
  if (num_microbatches <= 0) throw_invalid("get_microbatch", "num_microbatches must be positive");
  if (index < 0 || index >= num_microbatches)
    throw_invalid("get_microbatch", "index " + std::to_string(index) + " out of range for " +
                                        std::to_string(num_microbatches) + " microbatches");
  std::map<std::string, Array> out;
  for (const auto& [k, a] : batch) {
    if (!a.has_dim(batch_dim))
      throw_invalid("get_microbatch", "feature '" + k + "' " + a.shape().to_string() + " has no dim '" + batch_dim + "'");
    const int64_t b = a.dim(batch_dim);
    if (b % num_microbatches != 0)
      throw_invalid("get_microbatch", "batch size " + std::to_string(b) + " of '" + k +
                                          "' is not divisible by num_microbatches " + std::to_string(num_microbatches));
    const int64_t m = b / num_microbatches;
    out[k] = slice(a, batch_dim, index * m, m);
  }
  return out;
}

GradAccumulator::GradAccumulator(const ParamTree& params) {
  for (const auto& [k, p] : params) sum_[k] = Array(p.shape(), DType::f32, p.sharding());
}

void GradAccumulator::add(const ParamTree& grads) {
  for (auto& [k, acc] : sum_) {
    auto it = grads.find(k);
    if (it == grads.end()) throw_invalid("GradAccumulator", "no gradient for '" + k + "'");
    if (it->second.local_shape() != acc.local_shape())
      throw_invalid("GradAccumulator", "gradient for '" + k + "' has shape " + it->second.shape().to_string() +
                                           ", expected " + acc.shape().to_string());
    check_float("GradAccumulator", k, it->second);
    kernels::cpu::accumulate_f32(it->second.dtype(), it->second.raw_data(), acc.local_size(), acc.data<float>());
  }
  ++count_;
}

ParamTree accumulate_grads_microbatched(const ParamTree& params, int64_t num_microbatches,
                                        const std::function<ParamTree(int64_t)>& grad_fn) {
  if (num_microbatches <= 1) return grad_fn(0);
  return sum_pairwise<GradAccumulator>(
             num_microbatches,
             [&](int64_t i) {
               GradAccumulator g(params);
               g.add(grad_fn(i));
               return g;
             },
             [](GradAccumulator& left, const GradAccumulator& right) { left.add(right.sum()); })
      .sum();
}

}  // namespace t5x
