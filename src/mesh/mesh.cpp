#include "mesh/mesh.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>

namespace t5x {
namespace {

std::string shape_string(const std::vector<int64_t>& sizes, const std::vector<std::string>& names) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) os << ", ";
    if (i < names.size()) os << names[i] << "=";
    os << sizes[i];
  }
  os << ")";
  return os.str();
}

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("[mesh] " + msg); }

}  // namespace

std::string mesh_to_string(const MeshDesc& d) { return shape_string(d.axis_sizes, d.axis_names); }

Mesh::Mesh(std::vector<int64_t> axis_sizes, std::vector<std::string> axis_names, int64_t device_id) {
  if (axis_sizes.size() != axis_names.size())
    fail("mesh shape " + shape_string(axis_sizes, {}) + " has " + std::to_string(axis_sizes.size()) +
         " axes but " + std::to_string(axis_names.size()) + " axis names were given");
  if (axis_sizes.empty()) fail("a mesh needs at least one axis");
  std::set<std::string> seen;
  for (size_t i = 0; i < axis_sizes.size(); ++i) {
    if (axis_names[i].empty()) fail("mesh axis " + std::to_string(i) + " has an empty name");
    if (!seen.insert(axis_names[i]).second)
      fail("mesh axis name '" + axis_names[i] + "' is used twice in " +
           shape_string(axis_sizes, axis_names));
    if (axis_sizes[i] < 1)
      fail("mesh axis '" + axis_names[i] + "' has size " + std::to_string(axis_sizes[i]) +
           "; sizes must be >= 1");
  }
  auto d = std::make_shared<MeshDesc>();
  d->axis_names = std::move(axis_names);
  d->axis_sizes = std::move(axis_sizes);
  d->device_id = device_id;
  if (device_id < 0 || device_id >= d->num_devices())
    fail("device id " + std::to_string(device_id) + " is outside mesh " + mesh_to_string(*d) +
         " of " + std::to_string(d->num_devices()) + " devices");
  desc_ = std::move(d);
}

Mesh::Mesh(const MeshDesc& desc) : Mesh(desc.axis_sizes, desc.axis_names, desc.device_id) {}

Mesh Mesh::for_processes(std::vector<int64_t> axis_sizes, int64_t num_processes, int64_t device_id,
                         std::vector<std::string> axis_names) {
  int64_t n = 1;
  for (int64_t s : axis_sizes) n *= s;
  if (n != num_processes)
    fail("mesh " + shape_string(axis_sizes, axis_names) + " needs " + std::to_string(n) +
         " devices but " + std::to_string(num_processes) + " processes are running" +
         " (one device per process; launch with mpirun -np " + std::to_string(n) + ")");
  return Mesh(std::move(axis_sizes), std::move(axis_names), device_id);
}

Mesh Mesh::from_partitioner(int64_t num_devices, int64_t device_id, int64_t num_partitions,
                            std::vector<int64_t> model_parallel_submesh) {
  if (num_devices < 1) fail("num_devices must be >= 1, got " + std::to_string(num_devices));
  const bool has_np = num_partitions > 0, has_sub = !model_parallel_submesh.empty();
  if (num_partitions < 0) fail("num_partitions must be >= 1, got " + std::to_string(num_partitions));
  if (has_np && has_sub)
    fail("at most one of num_partitions (" + std::to_string(num_partitions) +
         ") and model_parallel_submesh " + shape_string(model_parallel_submesh, {}) +
         " may be set");
  if (!has_np && !has_sub) fail("at least one of num_partitions or model_parallel_submesh must be set");
  int64_t model = num_partitions;
  std::string what = "num_partitions=" + std::to_string(num_partitions);
  if (has_sub) {
    model = 1;
    for (int64_t s : model_parallel_submesh) {
      if (s < 1) fail("model_parallel_submesh " + shape_string(model_parallel_submesh, {}) +
                      " has a non-positive entry");
      model *= s;
    }
    what = "model_parallel_submesh " + shape_string(model_parallel_submesh, {}) + " (product " +
           std::to_string(model) + ")";
  }
  if (num_devices % model != 0)
    fail(what + " does not divide the " + std::to_string(num_devices) +
         " devices; the model-parallel size must be a factor of the device count");
  return Mesh({num_devices / model, model}, {"data", "model"}, device_id);
}

Mesh Mesh::for_moe(int64_t num_devices, int64_t device_id, int64_t num_expert_partitions, int64_t num_partitions,
                   std::vector<int64_t> model_parallel_submesh) {
  if (num_expert_partitions < 1)
    fail("num_expert_partitions must be >= 1, got " + std::to_string(num_expert_partitions));
  Mesh base = from_partitioner(num_devices, device_id, num_partitions, std::move(model_parallel_submesh));
  const int64_t data = base.axis_sizes()[0], model = base.axis_sizes()[1];
  int64_t expert = std::min(num_expert_partitions, data);
  while (data % expert != 0) --expert;
  return Mesh({data / expert, expert, model}, {"data", "expert", "model"}, device_id);
}

int Mesh::axis_index(const std::string& name) const {
  int i = desc_->axis_index(name);
  if (i < 0) fail("unknown mesh axis '" + name + "'; mesh is " + to_string());
  return i;
}

int64_t Mesh::axis_size(const std::string& name) const { return desc_->axis_sizes[axis_index(name)]; }

int64_t Mesh::axes_size(const std::vector<std::string>& axes) const {
  int64_t n = 1;
  for (int i : axis_indices(axes)) n *= desc_->axis_sizes[i];
  return n;
}

std::vector<int64_t> Mesh::coords(int64_t device) const {
  if (device < 0 || device >= num_devices())
    fail("device " + std::to_string(device) + " is outside mesh " + to_string());
  std::vector<int64_t> c(ndim());
  for (int a = ndim() - 1; a >= 0; --a) {
    c[a] = device % desc_->axis_sizes[a];
    device /= desc_->axis_sizes[a];
  }
  return c;
}

int64_t Mesh::device_at(const std::vector<int64_t>& c) const {
  if (int(c.size()) != ndim()) fail("coordinates have the wrong rank for mesh " + to_string());
  int64_t id = 0;
  for (int a = 0; a < ndim(); ++a) {
    if (c[a] < 0 || c[a] >= desc_->axis_sizes[a])
      fail("coordinate " + std::to_string(c[a]) + " is outside axis '" + desc_->axis_names[a] + "'");
    id = id * desc_->axis_sizes[a] + c[a];
  }
  return id;
}

std::vector<int> Mesh::axis_indices(const std::vector<std::string>& axes) const {
  std::vector<int> idx;
  for (const auto& a : axes) {
    int i = axis_index(a);
    for (int j : idx)
      if (j == i) fail("mesh axis '" + a + "' is listed twice in a group");
    idx.push_back(i);
  }
  return idx;
}

std::vector<int64_t> Mesh::group(const std::vector<std::string>& axes, int64_t device) const {
  std::vector<int> idx = axis_indices(axes);
  std::vector<int64_t> base = coords(device);
  int64_t n = 1;
  for (int i : idx) n *= desc_->axis_sizes[i];
  std::vector<int64_t> out(n);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int64_t> c = base;
    int64_t rem = r;
    for (int k = int(idx.size()) - 1; k >= 0; --k) {
      c[idx[k]] = rem % desc_->axis_sizes[idx[k]];
      rem /= desc_->axis_sizes[idx[k]];
    }
    out[r] = device_at(c);
  }
  return out;
}

int64_t Mesh::rank_in_group(const std::vector<std::string>& axes, int64_t device) const {
  std::vector<int> idx = axis_indices(axes);
  std::vector<int64_t> c = coords(device);
  int64_t r = 0;
  for (int i : idx) r = r * desc_->axis_sizes[i] + c[i];
  return r;
}

int64_t Mesh::group_index(const std::vector<std::string>& axes, int64_t device) const {
  std::vector<int> idx = axis_indices(axes);
  std::vector<int64_t> c = coords(device);
  int64_t g = 0;
  for (int a = 0; a < ndim(); ++a) {
    bool in_group = false;
    for (int i : idx) in_group |= (i == a);
    if (!in_group) g = g * desc_->axis_sizes[a] + c[a];
  }
  return g;
}

std::vector<std::vector<int64_t>> Mesh::groups(const std::vector<std::string>& axes) const {
  int64_t per = axes_size(axes);
  std::vector<std::vector<int64_t>> out(num_devices() / per);
  for (int64_t d = 0; d < num_devices(); ++d) {
    auto& g = out[group_index(axes, d)];
    if (g.empty()) g = group(axes, d);
  }
  return out;
}

Mesh Mesh::with_device(int64_t device_id) const {
  return Mesh(desc_->axis_sizes, desc_->axis_names, device_id);
}

std::string Mesh::to_string() const { return mesh_to_string(*desc_); }

DataLayout data_layout(const Mesh& mesh, int64_t batch_size, const std::vector<std::string>& data_axes) {
  const int64_t data_size = mesh.axes_size(data_axes);
  DataLayout l;
  l.batch_size = batch_size ? batch_size : data_size;
  if (l.batch_size < 0 || l.batch_size % data_size != 0)
    fail("Batch size (" + std::to_string(l.batch_size) + ") must be divisible by corresponding data mesh size (" +
         std::to_string(data_size) + ") of mesh " + mesh.to_string());
  l.num_shards = data_size;
  l.shard_id = mesh.rank_in_group(data_axes, mesh.device_id());
  l.is_first_host_in_replica_set = mesh.group_index(data_axes, mesh.device_id()) == 0;
  return l;
}

}  // namespace t5x
