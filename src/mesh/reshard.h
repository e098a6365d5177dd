// Resharding between two PartitionSpecs of the same global array: a plan of
// collectives (pure logic) and its execution on raw shard buffers.
//
// Semantics follow Mesh-TensorFlow's reshape lowering and GSPMD's
// ReshardNoCache (sharding.md 1.3, 3.6), one mesh axis at a time:
//   kSlice      a dim gains axis x as its new minor-most split: keep piece
//               coord_x of the local shard (MTF allsplit, GSPMD dynamic-slice);
//               no traffic.
//   kAllGather  a dim loses its minor-most axis x: all-gather over x and
//               concat along the dim (MTF allconcat); S_loc*(|x|-1) bytes.
//   kAllToAll   axis x moves from the minor end of dim `dim` to the minor end
//               of dim `split_dim`: split along split_dim, all-to-all over x,
//               concat along dim; S_loc*(|x|-1)/|x| bytes.
//   kPermute    same shard count per dim and same mesh axes in use, but a
//               different device order (e.g. P(('data','model')) ->
//               P(('model','data'))): one collective-permute over the whole
//               mesh; S_loc bytes for a device whose shard comes from another
//               device, 0 for one that already holds it (GSPMD: "same tile
//               shape, other device order").
// Only the minor-most axis of a dim can leave it cheaply (gathering a major
// axis would leave a non-contiguous shard), so axes are peeled minor first and
// added major first. Greedy order: free slices first (they shrink what later
// steps move), then all-to-alls, then all-gathers. The plan is always correct;
// it is the cheapest for single-axis moves (the cases of sharding.md T1.5,
// T1.6, T3.12) but not guaranteed optimal when several axes move at once.
// Bytes are those sent by the planning device (mesh.device_id), computed with
// the formulas of sharding.md section 0 on the local shard size at that step;
// they are the same on every device except for kPermute.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/sharding.h"
#include "mesh/communicator.h"
#include "mesh/mesh_groups.h"
#include "mesh/partition_spec.h"

namespace t5x {

enum class ReshardKind { kSlice, kAllGather, kAllToAll, kPermute };
const char* reshard_kind_name(ReshardKind k);

struct ReshardStep {
  ReshardKind kind = ReshardKind::kSlice;
  std::string axis;       // the mesh axis x this step adds, removes or moves (empty for kPermute)
  int dim = -1;           // dim sliced (kSlice), gathered (kAllGather) or concatenated (kAllToAll)
  int split_dim = -1;     // kAllToAll only: the dim that gains x
  int64_t group_size = 1;                  // |x| (all devices for kPermute)
  std::vector<std::pair<int, int>> pairs;  // kPermute: (source, destination) device ids
  std::vector<int64_t> local_before;       // local shard shape before the step
  std::vector<int64_t> local_after;        // ... and after
  PartitionSpec spec_after;
  double bytes = 0;                        // bytes sent by mesh.device_id
};

struct ReshardPlan {
  NamedShape shape;
  PartitionSpec src, dst;
  size_t elem_size = 4;
  std::vector<ReshardStep> steps;

  double total_bytes() const;
  int count(ReshardKind k) const;
  // One line per step, e.g. "all_to_all over 'model': dim 0 'batch' <- dim 1 'embed', 96 B/rank".
  std::string to_string() const;
};

// Validates both specs against the mesh and shape (errors as in
// validate_partition_spec) and plans src -> dst. Equal specs give no steps.
ReshardPlan plan_reshard(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& src,
                         const PartitionSpec& dst, size_t elem_size);

// Runs `plan` on this process's shard. `in` holds the src-local shard,
// `out` receives the dst-local shard (row-major, elem_size bytes per element;
// dtype only picks the MPI type); the two must not overlap. Collective over
// groups.world().
void execute_reshard(const ReshardPlan& plan, MeshGroups& groups, const void* in, void* out, CommDtype dtype);

// Copies `device`'s shard of a full row-major global array (test oracle and
// host-to-device placement).
void extract_shard(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& spec, int64_t device,
                   const void* global, void* shard, size_t elem_size);

}  // namespace t5x
