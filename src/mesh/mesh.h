// Device mesh with named axes (jax.sharding.Mesh / Mesh-TensorFlow mesh shape).
//
// Devices are numbered row-major over the mesh coordinates, the last axis
// varying fastest (MTF: pnum = sum_i coord[i] * prod_{j>i} size[j]). On CPU
// there is one device per process, so device id == process rank.
//
// A "group over axes A" is the set of devices whose coordinates differ only on
// the axes in A. Its members are ordered row-major over A *in the order given*
// (so a dim split over ("data","model") and one split over ("model","data")
// have different group orders, matching their shard numbering).
// Example, mesh (data=2, model=3):
//   group over {"model"} of device 4 = {3,4,5}; over {"data"} = {1,4};
//   groups over {"data"} = {0,3},{1,4},{2,5}.
//
// Construction mirrors t5x's partitioner settings (t5x/partitioning.py):
//   num_partitions = size of 'model'; the remainder of the devices forms 'data';
//   model_parallel_submesh = a tuple whose product is the 'model' size (on CPU
//   processes form a line, so only the product matters);
//   the two are mutually exclusive (t5x logs an error and announces a ValueError).
// Errors throw std::invalid_argument with a "[mesh] " prefix and name the
// offending values, e.g. "[mesh] mesh (data=2, model=2) needs 4 devices but 3
// processes are running".
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/sharding.h"

namespace t5x {

class Mesh {
 public:
  // Explicit shape. Names must be unique and non-empty, sizes >= 1, and
  // 0 <= device_id < prod(sizes). Default names: ("data", "model").
  Mesh(std::vector<int64_t> axis_sizes, std::vector<std::string> axis_names = {"data", "model"},
       int64_t device_id = 0);
  explicit Mesh(const MeshDesc& desc);

  // The mesh must cover exactly `num_processes` devices; otherwise the error
  // names the shape, the needed count and the running count.
  static Mesh for_processes(std::vector<int64_t> axis_sizes, int64_t num_processes,
                            int64_t device_id,
                            std::vector<std::string> axis_names = {"data", "model"});

  // t5x partitioner settings -> Mesh(data, model). Exactly one of the two
  // settings must be given (0 / empty = unset). num_partitions (or the
  // submesh product) must divide num_devices.
  static Mesh from_partitioner(int64_t num_devices, int64_t device_id, int64_t num_partitions,
                               std::vector<int64_t> model_parallel_submesh = {});

  // t5x contrib/moe default_moe_mesh: the (data, model) mesh above with the
  // largest divisor of |data| that is <= num_expert_partitions factored out of
  // 'data' into a new 'expert' axis: axes (data, expert, model). Device order
  // is unchanged (data = data' * |expert| + expert).
  static Mesh for_moe(int64_t num_devices, int64_t device_id, int64_t num_expert_partitions,
                      int64_t num_partitions, std::vector<int64_t> model_parallel_submesh = {});

  const MeshDesc& desc() const { return *desc_; }
  std::shared_ptr<const MeshDesc> desc_ptr() const { return desc_; }
  int ndim() const { return int(desc_->axis_sizes.size()); }
  const std::vector<std::string>& axis_names() const { return desc_->axis_names; }
  const std::vector<int64_t>& axis_sizes() const { return desc_->axis_sizes; }
  int64_t num_devices() const { return desc_->num_devices(); }
  int64_t device_id() const { return desc_->device_id; }

  // Index of a named axis; throws "[mesh] unknown mesh axis 'x'; mesh is (data=2, model=4)".
  int axis_index(const std::string& name) const;
  int64_t axis_size(const std::string& name) const;
  // Product of the sizes of the given axes (1 for none).
  int64_t axes_size(const std::vector<std::string>& axes) const;

  // Coordinates of a device (all axes) and the device at given coordinates.
  std::vector<int64_t> coords(int64_t device) const;
  int64_t device_at(const std::vector<int64_t>& coords) const;
  int64_t coord(const std::string& axis) const { return coords(device_id())[axis_index(axis)]; }

  // Members of `device`'s group over `axes` (ordered as described above).
  std::vector<int64_t> group(const std::vector<std::string>& axes, int64_t device) const;
  std::vector<int64_t> group(const std::vector<std::string>& axes) const {
    return group(axes, device_id());
  }
  // Position of `device` inside its group over `axes` (row-major over axes).
  int64_t rank_in_group(const std::vector<std::string>& axes, int64_t device) const;
  // Index of `device`'s group among all groups over `axes`: row-major over the
  // remaining axes in mesh order. Usable as the "color" of a communicator split.
  int64_t group_index(const std::vector<std::string>& axes, int64_t device) const;
  // All groups over `axes`, ordered by group_index.
  std::vector<std::vector<int64_t>> groups(const std::vector<std::string>& axes) const;

  // Same mesh seen from another device.
  Mesh with_device(int64_t device_id) const;

  // "(data=2, model=4)".
  std::string to_string() const;

 private:
  // Validates that `axes` are known and distinct; returns their indices.
  std::vector<int> axis_indices(const std::vector<std::string>& axes) const;
  std::shared_ptr<const MeshDesc> desc_;
};

// Which slice of the global batch this process feeds (t5x
// BasePartitioner.get_data_layout, one device per host). The batch is split
// over `data_axes` (('replica','data') on a multi-slice mesh): shard_id is the
// process's index along them (row-major), num_shards their product, and the
// process whose coordinates on all other axes are 0 is the first host of its
// replica set. batch_size 0 means "the data mesh size". Errors:
// "[mesh] Batch size (10) must be divisible by corresponding data mesh size (4)".
struct DataLayout {
  int64_t batch_size = 0;
  int64_t shard_id = 0;
  int64_t num_shards = 1;
  bool is_first_host_in_replica_set = true;
};
DataLayout data_layout(const Mesh& mesh, int64_t batch_size,
                       const std::vector<std::string>& data_axes = {"data"});

// "(data=2, model=4)" for a MeshDesc.
std::string mesh_to_string(const MeshDesc& desc);

}  // namespace t5x
