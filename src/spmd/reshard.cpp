#include "spmd/reshard.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "mesh/reshard.h"
#include "ops/primitive.h"
#include "ops/shape.h"
#include "spmd/context.h"
#include "spmd/local.h"

namespace t5x::spmd {
namespace {

Array run_plan(const Array& local, const Shape& shape, const PartitionSpec& src, const PartitionSpec& dst) {
  Context& ctx = context();
  if (local.dtype() == DType::boolean) {
    // Masks (e.g. dropout keep-masks meeting split activations): moved as
    // int32, since the communicators carry no 1-byte type.
    ReshardPlan plan = plan_reshard(ctx.mesh().desc(), named_shape(shape), src, dst, sizeof(int32_t));
    const Shape out_shape = local_shape_of(shape, ctx.sharding(dst));
    std::vector<int32_t> in(size_t(local.local_size())), wide(size_t(out_shape.numel()));
    const uint8_t* b = static_cast<const uint8_t*>(local.raw_data());
    for (size_t i = 0; i < in.size(); ++i) in[i] = b[i];
    execute_reshard(plan, ctx.groups(), in.data(), wide.data(), CommDtype::kI32);
    Array out(out_shape, DType::boolean, {}, {}, false);
    uint8_t* o = static_cast<uint8_t*>(out.raw_data());
    for (size_t i = 0; i < wide.size(); ++i) o[i] = wide[i] != 0;
    return out;
  }
  const size_t es = dtype_size(local.dtype());
  ReshardPlan plan = plan_reshard(ctx.mesh().desc(), named_shape(shape), src, dst, es);
  Array out(local_shape_of(shape, ctx.sharding(dst)), local.dtype(), {}, {}, false);
  CommDtype cd = local.dtype() == DType::f16 ? CommDtype::kBF16 : comm_dtype(local.dtype(), "reshard");
  execute_reshard(plan, ctx.groups(), local.raw_data(), out.raw_data(), cd);
  return out;
}

class ReshardP : public Primitive {
 public:
  ReshardP(Shape s, PartitionSpec a, PartitionSpec b) : shape_(std::move(s)), src_(std::move(a)), dst_(std::move(b)) {}
  const char* name() const override { return "reshard"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {run_plan(in[0], shape_, src_, dst_)}; }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {run_plan(cot[0], shape_, dst_, src_)};
  }

 private:
  Shape shape_;
  PartitionSpec src_, dst_;
};

}  // namespace

Array reshard_local(const Array& local, const Shape& shape, const PartitionSpec& src, const PartitionSpec& dst) {
  if (src == dst) return local;
  return apply1(std::make_shared<ReshardP>(shape, src, dst), {local});
}

double reshard_cost(const Shape& shape, const PartitionSpec& src, const PartitionSpec& dst, size_t es) {
  if (src == dst) return 0;
  MeshDesc d0 = context().mesh().desc();
  d0.device_id = 0;
  ReshardPlan plan = plan_reshard(d0, named_shape(shape), src, dst, es);
  double bytes = 0;
  for (const auto& s : plan.steps) {
    double sz = 1;
    for (int64_t v : s.local_before) sz *= double(v);
    sz *= double(es);
    const double k = double(s.group_size);
    switch (s.kind) {
      case ReshardKind::kSlice: break;
      case ReshardKind::kAllGather: bytes += sz * (k - 1); break;
      case ReshardKind::kAllToAll: bytes += sz * (k - 1) / k; break;
      case ReshardKind::kPermute: bytes += sz; break;
    }
  }
  return bytes;
}

Array reshard(const Array& x, const PartitionSpec& spec) {
  check_mesh("reshard", x);
  PartitionSpec src = spec_of(x);
  if (src == spec) return x;
  Context& ctx = context();
  Array out = reshard_local(to_local(x), x.shape(), src, spec);
  return from_local(out, x.shape(), ctx.sharding(spec));
}

Array with_sharding_constraint(const Array& x, const std::vector<std::string>& names, const LogicalAxisRules& rules,
                               RulesFallback fallback) {
  if (int(names.size()) != x.rank())
    throw_invalid("with_sharding_constraint", std::to_string(names.size()) + " logical names for " +
                                                  describe_sharded(x));
  std::optional<PartitionSpec> spec = logical_to_mesh_axes(names, rules, fallback);
  if (!spec) return x;
  // Axes the mesh lacks are dropped, as on a mesh where they would have size 1.
  const Mesh& m = context().mesh();
  for (auto& d : spec->dims) {
    std::vector<std::string> keep;
    for (auto& a : d) {
      bool known = false;
      for (const auto& n : m.axis_names()) known = known || n == a;
      if (known) keep.push_back(a);
    }
    d = keep;
  }
  validate_partition_spec(m.desc(), named_shape(x.shape()), *spec);
  return reshard(x, *spec);
}

Array with_sharding_constraint(const Array& x, const LogicalAxisRules& rules, RulesFallback fallback) {
  return with_sharding_constraint(x, x.names(), rules, fallback);
}

Array rename(const Array& x, const std::map<std::string, std::string>& renames) {
  if (x.is_fully_local()) return t5x::rename(x, renames);
  check_mesh("rename", x);
  Array r = t5x::rename(to_local(x), renames);
  std::vector<Dim> dims = x.shape().dims();
  for (auto& d : dims)
    if (auto it = renames.find(d.name); it != renames.end()) d.name = it->second;
  return from_local(r, Shape(std::move(dims)), x.sharding());
}

Array shard(const Array& full, const PartitionSpec& spec) {
  if (!full.is_fully_local() || full.local_shape() != full.shape())
    throw_invalid("shard", "expects a full array on every process, got " + describe_sharded(full));
  Context& ctx = context();
  validate_partition_spec(ctx.mesh().desc(), named_shape(full.shape()), spec);
  Sharding s = ctx.sharding(spec);
  Array out(full.shape(), full.dtype(), s, {}, false);
  extract_shard(ctx.mesh().desc(), named_shape(full.shape()), spec, ctx.mesh().device_id(), full.raw_data(),
                out.raw_data(), dtype_size(full.dtype()));
  return out;
}

Array gather(const Array& x) {
  check_mesh("gather", x);
  PartitionSpec src = spec_of(x);
  PartitionSpec rep = PartitionSpec::replicated(size_t(x.rank()));
  Array full(x.shape(), x.dtype(), {}, {}, false);
  if (src == rep || !x.sharding().mesh) {
    std::memcpy(full.raw_data(), x.raw_data(), x.nbytes());
    return full;
  }
  Array local(x.local_shape(), x.dtype(), {}, {}, false);
  std::memcpy(local.raw_data(), x.raw_data(), x.nbytes());
  Array g = run_plan(local, x.shape(), src, rep);
  std::memcpy(full.raw_data(), g.raw_data(), full.nbytes());
  return full;
}

}  // namespace t5x::spmd
