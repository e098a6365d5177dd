// PartitionSpec checks and shard geometry on a mesh (Mesh-TensorFlow layout
// rules, sharding.md 1.1; jax PartitionSpec semantics, t5x.md 2).
//
// A named shape is the global shape of an array, one (logical name, size) per
// dim, e.g. {{"batch",8},{"embed",512}}. A PartitionSpec gives, per dim, the
// mesh axes that split it, major to minor. Dim d split over axes (a1..ak) has
// n = |a1|*...*|ak| equal shards of size d/n; a device's shard index along d is
// sum_i coord_ai * prod_{j>i} |aj| and its shard starts at index*(d/n).
// Mesh axes used by no dim replicate the array over them.
//
// Like MTF (and unlike GSPMD's padded uneven shards) every split dim must be
// divisible by its shard count. Errors throw std::invalid_argument with a
// "[sharding] " prefix naming the dim (name and index) and the mesh axis.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/sharding.h"

namespace t5x {

using NamedShape = std::vector<std::pair<std::string, int64_t>>;

// Throws when: the spec's rank differs from the shape's; a dim names a mesh
// axis that the mesh lacks; one mesh axis splits two dims (or one dim twice);
// a dim's size is not divisible by the product of its axes' sizes.
void validate_partition_spec(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& spec);

// Number of shards along each dim (1 for unsplit dims).
std::vector<int64_t> num_shards(const MeshDesc& mesh, const PartitionSpec& spec);
// Shape of one device's shard (the same on every device).
std::vector<int64_t> local_shape(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& spec);
// Shard index of `device` along each dim.
std::vector<int64_t> shard_index(const MeshDesc& mesh, const PartitionSpec& spec, int64_t device);
// Global start offset of `device`'s shard along each dim.
std::vector<int64_t> shard_offset(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& spec,
                                  int64_t device);
// Mesh axes that split no dim: the array is replicated over them.
std::vector<std::string> replicated_axes(const MeshDesc& mesh, const PartitionSpec& spec);
// Index of `device` among the devices that hold the same shard (row-major over
// replicated_axes in mesh order); 0 marks the copy that e.g. writes a checkpoint.
int64_t replica_id(const MeshDesc& mesh, const PartitionSpec& spec, int64_t device);

// "P('data', None, ('data','model'))" in jax's notation, "P()" for rank 0.
std::string spec_to_string(const PartitionSpec& spec);
// "[batch=8, embed=512]".
std::string shape_to_string(const NamedShape& shape);

}  // namespace t5x
