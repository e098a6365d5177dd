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
      throw_invalid(op, "gradient of '" + path + "' is split across processes; clip_global_norm needs the "
                        "run's ShardComm (spmd::shard_comm()) passed to apply_gradient");
  }
  return g;
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
    Array r(g.shape(), g.dtype(), g.sharding());
    kernels::cpu::div_mul(g.dtype(), g.raw_data(), g.local_size(), norm, float(max_norm), r.raw_data());
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
