#include "spmd/local.h"

#include <map>
#include <utility>

#include "core/error.h"
#include "mesh/reshard.h"
#include "ops/autodiff.h"
#include "ops/primitive.h"
#include "spmd/context.h"

namespace t5x::spmd {
namespace {

// Handle on `buffer` with `shape` (single device), no copy.
Array view_of(const std::shared_ptr<Buffer>& buffer, const Shape& shape, DType dt, const Sharding& sharding,
              const Shape& global) {
  Array a(Shape{}, dt, {}, {}, false);
  ArrayImpl& im = a.impl();
  im.shape = global;
  im.local_shape = shape;
  im.sharding = sharding;
  im.buffer = buffer;
  return a;
}

Array local_view(const Array& x) { return view_of(x.impl().buffer, x.local_shape(), x.dtype(), {}, x.local_shape()); }

// Local part of a cotangent `g` for a global value of `shape`/`sharding`: a
// view when g already holds the shard, else the shard cut from a full g.
Array local_part(const Array& g, const Shape& shape, const Sharding& sharding) {
  Shape loc = local_shape_of(shape, sharding);
  if (g.local_shape() == loc) return view_of(g.impl().buffer, loc, g.dtype(), {}, loc);
  if (!g.is_fully_local() || g.shape() != shape)
    throw_invalid("spmd", "cotangent " + g.shape().to_string() + " does not match a value of " + shape.to_string());
  Array out(loc, g.dtype(), {}, {}, false);
  extract_shard(*sharding.mesh, named_shape(shape), sharding.spec, sharding.mesh->device_id, g.raw_data(),
                out.raw_data(), dtype_size(g.dtype()));
  return out;
}

class ToLocal : public Primitive {
 public:
  const char* name() const override { return "to_local"; }
  bool accepts_split_inputs() const override { return true; }  // its input is the global array
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    shape_ = in[0].shape();
    sharding_ = in[0].sharding();
    return {local_view(in[0])};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {view_of(cot[0].impl().buffer, cot[0].local_shape(), cot[0].dtype(), sharding_, shape_)};
  }

 private:
  Shape shape_;
  Sharding sharding_;
};

class FromLocal : public Primitive {
 public:
  FromLocal(Shape shape, Sharding sharding) : shape_(std::move(shape)), sharding_(std::move(sharding)) {}
  const char* name() const override { return "from_local"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    return {view_of(in[0].impl().buffer, in[0].local_shape(), in[0].dtype(), sharding_, shape_)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    if (sharding_.is_single_device()) return {cot[0]};
    return {local_part(cot[0], shape_, sharding_)};
  }

 private:
  Shape shape_;
  Sharding sharding_;
};

// Per-thread cache: tracked global array (tape, slot) -> its tracked local view.
struct CachedView {
  std::weak_ptr<Buffer> buffer;
  Shape shape;
  DType dtype;
  AutodiffTag tag;
};
struct ViewCache {
  uint64_t tape = 0;
  std::map<int64_t, CachedView> views;
};
thread_local ViewCache t_cache;

void remember(const Array& global, const Array& local) {
  const AutodiffTag& g = global.impl().tag;
  const AutodiffTag& l = local.impl().tag;
  if (g.tape == 0 || l.tape != g.tape) return;
  if (t_cache.tape != g.tape) {
    t_cache.views.clear();
    t_cache.tape = g.tape;
  }
  t_cache.views[g.slot] = CachedView{local.impl().buffer, local.local_shape(), local.dtype(), l};
}

}  // namespace

NamedShape named_shape(const Shape& s) {
  NamedShape n;
  for (const Dim& d : s.dims()) n.emplace_back(d.name, d.size);
  return n;
}

CommDtype comm_dtype(DType dt, const char* op) {
  switch (dt) {
    case DType::f32: return CommDtype::kF32;
    case DType::bf16: return CommDtype::kBF16;
    case DType::i32: return CommDtype::kI32;
    case DType::i64: return CommDtype::kI64;
    default: break;
  }
  throw_invalid(op, std::string("collectives support float32, bfloat16, int32 and int64, got ") + dtype_name(dt) +
                        "; cast first");
}

PartitionSpec spec_of(const Array& x) {
  const Sharding& s = x.sharding();
  if (!s.mesh || s.spec.dims.empty()) return PartitionSpec::replicated(size_t(x.rank()));
  return s.spec;
}

std::vector<std::string> used_axes(const PartitionSpec& spec) {
  std::vector<std::string> out;
  for (const auto& d : spec.dims)
    for (const auto& a : d) out.push_back(a);
  return out;
}

void check_mesh(const char* op, const Array& x) {
  const auto& m = x.sharding().mesh;
  if (!m) return;
  const MeshDesc& c = context().mesh().desc();
  if (m->axis_names != c.axis_names || m->axis_sizes != c.axis_sizes)
    throw_invalid(op, "array " + std::string(dtype_name(x.dtype())) + x.shape().to_string() + " lives on mesh " +
                          mesh_to_string(*m) + " but the spmd context's mesh is " + mesh_to_string(c) +
                          "; call spmd::set_context first");
}

std::string describe_sharded(const Array& x) {
  return std::string(dtype_name(x.dtype())) + x.shape().to_string() + " " + spec_to_string(spec_of(x));
}

Array to_local(const Array& x) {
  if (x.sharding().is_single_device() && x.local_shape() == x.shape() && !x.sharding().mesh) return x;
  const AutodiffTag& tag = x.impl().tag;
  if (tag.tape != 0 && is_recording()) {
    if (t_cache.tape == tag.tape) {
      auto it = t_cache.views.find(tag.slot);
      if (it != t_cache.views.end()) {
        if (auto buf = it->second.buffer.lock()) {
          Array v = view_of(buf, it->second.shape, it->second.dtype, {}, it->second.shape);
          v.impl().tag = it->second.tag;
          return v;
        }
      }
    }
    Array v = apply1(std::make_shared<ToLocal>(), {x});
    remember(x, v);
    return v;
  }
  if (!is_recording() || tag.tape == 0) return local_view(x);
  return apply1(std::make_shared<ToLocal>(), {x});
}

Array from_local(const Array& local, const Shape& shape, const Sharding& sharding) {
  Shape loc = local_shape_of(shape, sharding);
  if (local.shape() != loc)
    throw_invalid("spmd", "local shard " + local.shape().to_string() + " does not match " + shape.to_string() + " " +
                              spec_to_string(sharding.spec) + " (local " + loc.to_string() + ")");
  Array g = apply1(std::make_shared<FromLocal>(shape, sharding), {local});
  remember(g, local);
  return g;
}

}  // namespace t5x::spmd
