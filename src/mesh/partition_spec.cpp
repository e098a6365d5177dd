#include "mesh/partition_spec.h"

#include <map>
#include <sstream>
#include <stdexcept>

#include "mesh/mesh.h"

namespace t5x {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("[sharding] " + msg); }

std::string dim_label(const NamedShape& shape, size_t d) {
  std::string name = d < shape.size() ? shape[d].first : "";
  return "dim " + std::to_string(d) + (name.empty() ? "" : " '" + name + "'");
}

std::string axes_string(const std::vector<std::string>& axes) {
  if (axes.size() == 1) return "'" + axes[0] + "'";
  std::string s = "(";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", '" : "'") + axes[i] + "'";
  return s + ")";
}

int64_t product_of(const MeshDesc& mesh, const std::vector<std::string>& axes) {
  int64_t n = 1;
  for (const auto& a : axes) {
    int i = mesh.axis_index(a);
    if (i < 0) fail("unknown mesh axis '" + a + "'; mesh is " + mesh_to_string(mesh));
    n *= mesh.axis_sizes[i];
  }
  return n;
}

}  // namespace

std::string spec_to_string(const PartitionSpec& spec) {
  std::string s = "P(";
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    if (d) s += ", ";
    s += spec.dims[d].empty() ? "None" : axes_string(spec.dims[d]);
  }
  return s + ")";
}

std::string shape_to_string(const NamedShape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t d = 0; d < shape.size(); ++d)
    os << (d ? ", " : "") << (shape[d].first.empty() ? "_" : shape[d].first) << "=" << shape[d].second;
  os << "]";
  return os.str();
}

void validate_partition_spec(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& spec) {
  if (spec.dims.size() != shape.size())
    fail("spec " + spec_to_string(spec) + " has " + std::to_string(spec.dims.size()) +
         " entries but the array " + shape_to_string(shape) + " has rank " + std::to_string(shape.size()));
  std::map<std::string, size_t> used;  // mesh axis -> dim that uses it
  for (size_t d = 0; d < shape.size(); ++d) {
    for (const auto& a : spec.dims[d]) {
      if (mesh.axis_index(a) < 0)
        fail(dim_label(shape, d) + " of " + shape_to_string(shape) + " is split over mesh axis '" + a +
             "', which mesh " + mesh_to_string(mesh) + " does not have");
      auto [it, fresh] = used.emplace(a, d);
      if (!fresh) {
        if (it->second == d)
          fail("mesh axis '" + a + "' appears twice in the spec of " + dim_label(shape, d) + " of " +
               shape_to_string(shape));
        fail("mesh axis '" + a + "' splits both " + dim_label(shape, it->second) + " and " +
             dim_label(shape, d) + " of " + shape_to_string(shape) + "; a mesh axis may split one dim only");
      }
    }
    if (shape[d].second < 0) fail(dim_label(shape, d) + " has negative size");
    int64_t n = product_of(mesh, spec.dims[d]);
    if (shape[d].second % n != 0)
      fail(dim_label(shape, d) + " of size " + std::to_string(shape[d].second) + " is not divisible by " +
           std::to_string(n) + ", the size of mesh axis " + axes_string(spec.dims[d]) + " in mesh " +
           mesh_to_string(mesh));
  }
}

std::vector<int64_t> num_shards(const MeshDesc& mesh, const PartitionSpec& spec) {
  std::vector<int64_t> n(spec.dims.size());
  for (size_t d = 0; d < n.size(); ++d) n[d] = product_of(mesh, spec.dims[d]);
  return n;
}

std::vector<int64_t> local_shape(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& spec) {
  validate_partition_spec(mesh, shape, spec);
  std::vector<int64_t> n = num_shards(mesh, spec), out(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) out[d] = shape[d].second / n[d];
  return out;
}

std::vector<int64_t> shard_index(const MeshDesc& mesh, const PartitionSpec& spec, int64_t device) {
  std::vector<int64_t> idx(spec.dims.size(), 0);
  for (size_t d = 0; d < spec.dims.size(); ++d)
    for (const auto& a : spec.dims[d]) {
      int i = mesh.axis_index(a);
      if (i < 0) fail("unknown mesh axis '" + a + "'; mesh is " + mesh_to_string(mesh));
      idx[d] = idx[d] * mesh.axis_sizes[i] + mesh.coord(device, i);
    }
  return idx;
}

std::vector<int64_t> shard_offset(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& spec,
                                  int64_t device) {
  std::vector<int64_t> loc = local_shape(mesh, shape, spec), idx = shard_index(mesh, spec, device);
  for (size_t d = 0; d < loc.size(); ++d) idx[d] *= loc[d];
  return idx;
}

std::vector<std::string> replicated_axes(const MeshDesc& mesh, const PartitionSpec& spec) {
  std::vector<std::string> out;
  for (const auto& name : mesh.axis_names) {
    bool used = false;
    for (const auto& dim : spec.dims)
      for (const auto& a : dim) used |= (a == name);
    if (!used) out.push_back(name);
  }
  return out;
}

int64_t replica_id(const MeshDesc& mesh, const PartitionSpec& spec, int64_t device) {
  int64_t r = 0;
  for (const auto& a : replicated_axes(mesh, spec)) {
    int i = mesh.axis_index(a);
    r = r * mesh.axis_sizes[i] + mesh.coord(device, i);
  }
  return r;
}

}  // namespace t5x
