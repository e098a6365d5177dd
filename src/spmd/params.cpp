#include "spmd/params.h"

#include "mesh/partition_spec.h"
#include "ops/autodiff.h"
#include "spmd/context.h"
#include "spmd/local.h"
#include "spmd/reshard.h"

namespace t5x::spmd {

PartitionSpec param_spec(const Shape& shape, const LogicalAxisRules& rules) {
  PartitionSpec spec = logical_to_mesh_axes(shape.names(), rules);
  const Mesh& m = context().mesh();
  for (auto& d : spec.dims) {
    std::vector<std::string> keep;
    for (auto& a : d)
      for (const auto& n : m.axis_names())
        if (n == a) keep.push_back(a);
    d = keep;
  }
  replicate_indivisible_kv_heads(m.desc(), named_shape(shape), spec);
  validate_partition_spec(m.desc(), named_shape(shape), spec);
  return spec;
}

void throw_param_sharding_error(const std::string& name, const std::invalid_argument& e) {
  std::string m = e.what();
  const std::string tag = "[sharding] ";
  if (m.rfind(tag, 0) == 0) m.erase(0, tag.size());
  std::string out = tag + "parameter '" + name + "': " + m;
  if (m.find(" is not divisible by ") != std::string::npos && m.find("hint:") == std::string::npos) {
    out += "\n  hint: a dim that logical_axis_rules split over a mesh axis must be a multiple of the axis' size: ";
    if (m.find("mesh axis 'expert'") != std::string::npos)  // the MoE mesh's expert axis
      out += "choose NUM_EXPERT_PARTITIONS (the 'expert' axis, partitioning.MoePjitPartitioner."
             "num_expert_partitions) to divide NUM_EXPERTS, or NUM_EXPERTS to be a multiple of it";
    else
      out += "choose a 'model' size (partitioning.PjitPartitioner.num_partitions or model_parallel_submesh, and "
             "the process count) that divides it, or change the model's sizes in its gin";
  }
  throw std::invalid_argument(out);
}

PartitionSpec param_spec(const std::string& name, const Shape& shape, const LogicalAxisRules& rules) {
  try {
    return param_spec(shape, rules);
  } catch (const std::invalid_argument& e) {
    throw_param_sharding_error(name, e);
  }
}

std::map<std::string, PartitionSpec> param_specs(const std::map<std::string, Shape>& shapes,
                                                 const LogicalAxisRules& rules) {
  std::map<std::string, PartitionSpec> out;
  for (const auto& [k, s] : shapes) out[k] = param_spec(k, s, rules);
  return out;
}

ParamTree shard_params(const ParamTree& full, const LogicalAxisRules& rules) {
  ParamTree out;
  for (const auto& [k, p] : full) out[k] = shard(p, param_spec(k, p.shape(), rules));
  return out;
}

ParamTree gather_params(const ParamTree& sharded) {
  ParamTree out;
  for (const auto& [k, p] : sharded) out[k] = gather(p);
  return out;
}

ValueAndGrad value_and_grad(const std::function<Array(const ParamTree&)>& fn, const ParamTree& params) {
  ValueAndGrad r = t5x::value_and_grad(fn, params);
  for (auto& [k, g] : r.grads) {
    const Array& p = params.at(k);
    if (!g.valid() || p.is_fully_local() || g.local_shape() == p.local_shape()) continue;
    if (g.is_fully_local() && g.local_shape() == g.shape()) g = shard(g, spec_of(p));
  }
  return r;
}

ParamBytes param_bytes(const std::map<std::string, Shape>& shapes, DType dtype, const LogicalAxisRules& rules,
                       int slots_per_param) {
  ParamBytes b;
  const double es = double(dtype_size(dtype)), copies = double(1 + slots_per_param);
  for (const auto& [k, s] : shapes) {
    b.unsharded += double(s.numel()) * es * copies;
    b.per_process += double(local_shape_of(s, context().sharding(param_spec(s, rules))).numel()) * es * copies;
  }
  return b;
}

}  // namespace t5x::spmd
