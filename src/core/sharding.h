// How a global array is laid out over a device mesh (GSPMD / jax.sharding terms).
//
// A MeshDesc is the pure description of a device mesh: named axes with sizes,
// devices numbered row-major (the last axis varies fastest, as in
// jax.sharding.Mesh built from a reshaped device list), and the coordinate of
// the device this process drives. The communication side (groups per mesh axis,
// collectives) lives in src/mesh/ and refers to a MeshDesc.
//
// A PartitionSpec has one entry per array dimension: the mesh axes that dim is
// split over, major to minor (empty = not split). Mesh axes used by no dim
// replicate the array over them. Example on mesh (data=2, model=4):
//   [batch=8, embed=512] with spec {{"data"}, {}} -> local shard [batch=4, embed=512],
//   replicated over "model".
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace t5x {

struct MeshDesc {
  std::vector<std::string> axis_names;  // e.g. {"data", "model"}
  std::vector<int64_t> axis_sizes;      // e.g. {2, 4}
  int64_t device_id = 0;                // row-major index of this process's device

  int64_t num_devices() const {
    int64_t n = 1;
    for (int64_t s : axis_sizes) n *= s;
    return n;
  }
  // Index of `name` in axis_names, or -1.
  int axis_index(const std::string& name) const {
    for (size_t i = 0; i < axis_names.size(); ++i)
      if (axis_names[i] == name) return int(i);
    return -1;
  }
  // Coordinate of device `id` along axis `axis` (row-major, last axis fastest).
  int64_t coord(int64_t id, int axis) const {
    for (int a = int(axis_sizes.size()) - 1; a > axis; --a) id /= axis_sizes[a];
    return id % axis_sizes[axis];
  }
  bool operator==(const MeshDesc&) const = default;
};

struct PartitionSpec {
  std::vector<std::vector<std::string>> dims;  // per array dim: mesh axes, major to minor

  PartitionSpec() = default;
  explicit PartitionSpec(std::vector<std::vector<std::string>> d) : dims(std::move(d)) {}
  static PartitionSpec replicated(size_t rank) { return PartitionSpec(std::vector<std::vector<std::string>>(rank)); }
  bool operator==(const PartitionSpec&) const = default;
};

// A sharding = mesh + spec. A null mesh (the default) means one device:
// the local shard is the whole array.
struct Sharding {
  std::shared_ptr<const MeshDesc> mesh;
  PartitionSpec spec;

  bool is_single_device() const { return !mesh || mesh->num_devices() == 1; }
};

}  // namespace t5x
