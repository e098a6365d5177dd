// The processes of a run and how they split the work: the (data, model) mesh
// from the partitioner bindings (t5x PjitPartitioner: num_partitions or
// model_parallel_submesh), this process's data shard (t5x get_data_layout),
// the communicators over the processes that hold different data shards and
// over those of this process's data replica, and the spmd context over the
// whole mesh (plus the replica's own mesh in the mesh-invariant mode).
//
// Layout (t5x pjit with the standard logical-axis rules):
//   - 'data': process d of D feeds rows [d*B/D, (d+1)*B/D) of every global
//     batch.
//   - 'model': the M processes with the same data coordinate form one data
//     replica; parameters and optimizer slots are split over 'model' by their
//     logical axes (heads, mlp, vocab, joined_kv -> model) and every op of the
//     model runs through the spmd lowering (Megatron-style tensor parallelism).
// Every run on more than one process runs its step on one spmd context over
// the whole (data, model) mesh (`spmd`): parameters and optimizer slots take
// their layout from the logical-axis rules (parameter_partitioning_dims 2:
// embed -> data, ZeRO-3), the batch is a global Array split over 'data'. Two
// ways to lower the step on it (docs/trainer.md, "Two ways to run a step"):
//   - partial sums (partitioner.mesh_invariant = False): the whole step runs
//     through the spmd lowering of the full mesh; activations take their
//     layout from activation_partitioning_dims and the gradient sum over
//     'data' comes out of the collectives' vjps (all-reduce, or
//     reduce-scatter for data-split parameters).
//   - mesh-invariant (the default, the bitwise mode): a shard_map over 'data'.
//     Each data replica runs its gradient blocks (its rows of the global
//     batch, cut into its microbatches) on `replica`, the (data=1, model=M)
//     mesh of its model group, with the parameters gathered over 'data';
//     each gradient then leaves the block program through the transpose of
//     that broadcast, a pairwise all-reduce over 'data' in shard order
//     (spmd::all_reduce under a mesh-invariant context), and takes its
//     parameter's layout again. So D processes add the blocks one process
//     with num_microbatches = D adds, in its order, bit for bit.
// With partitioning.MoePjitPartitioner (t5x contrib/moe) the mesh is
// (data, expert, model) (Mesh::for_moe), the batch is split over
// ('expert', 'data') (`data_axes`: every process of a model group feeds its
// own rows), parameters take moe_logical_axis_rules (expert kernels split
// over 'expert') and the step runs with partial sums.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mesh/communicator.h"
#include "mesh/mesh.h"
#include "spmd/context.h"
#include "t5x/trainer/run_config.h"

namespace t5x::trainer {

struct Distributed {
  std::shared_ptr<Communicator> world;  // all processes
  std::shared_ptr<Communicator> data;   // processes with this one's 'model' coordinate (over data_axes)
  std::shared_ptr<Communicator> model;  // processes with this one's 'data' coordinate
  std::shared_ptr<Mesh> mesh;           // the (data, model) or (data, expert, model) mesh of all processes
  // The mesh axes the batch is split over, major first: ('data',) or, on the
  // MoE mesh, ('expert', 'data'). data_shard / num_data_shards count over them.
  std::vector<std::string> data_axes = {"data"};
  std::shared_ptr<spmd::Context> spmd;  // the whole mesh over `world`
  // Mesh-invariant runs on several processes: the (data=1, model=M) mesh of
  // this process's data replica over `model`, on which its gradient blocks
  // run (see above). Null otherwise.
  std::shared_ptr<spmd::Context> replica;
  bool one_mesh = false;                // more than one process: `spmd` spans them all
  int64_t data_shard = 0;
  int64_t num_data_shards = 1;
  int64_t model_shard = 0;
  int64_t num_model_shards = 1;

  // Size of the mesh's 'expert' axis (1 without one).
  int64_t num_expert_shards() const;
  // P(data_axes, None, ...) for an array of `rank` dims: a batch.
  PartitionSpec batch_spec(int rank) const;
  // True when parameters are split over a 'model' axis of more than one process.
  bool model_parallel() const { return num_model_shards > 1; }
  // True when the model runs through the spmd lowering on `spmd`'s mesh.
  bool spmd_active() const { return one_mesh; }
  // True when each data replica runs its gradient blocks apart (`replica`).
  bool blocks_per_replica() const { return replica != nullptr; }

  int rank() const { return world->rank(); }
  int size() const { return world->size(); }
  bool is_chief() const { return world->rank() == 0; }
  void barrier() const { if (world->size() > 1) world->barrier(); }

  // The world communicator (MPI under mpirun, else a single process) and the
  // mesh of `p` over it. Throws std::invalid_argument "[mesh] ..." when the
  // partitioning does not fit the process count.
  static Distributed create(const PartitionerConfig& p);
  // Same over a given communicator (tests).
  static Distributed create(const PartitionerConfig& p, std::shared_ptr<Communicator> world);

  // Minimum of `v` over all processes.
  int64_t min_over_world(int64_t v) const;
  // Sums `v` element-wise over the data group (in place): scalars (loss,
  // normalizing factor, metrics), float64.
  void sum_over_data(std::vector<double>& v) const;
  // Rank 0's value of `v` on every process.
  uint64_t broadcast(uint64_t v) const;
};

// P(data_axes, None, ...) for an array of `rank` dims: a batch split over
// 'data' (or, on the MoE mesh, over ('expert', 'data')).
PartitionSpec batch_spec(int rank, const std::vector<std::string>& data_axes = {"data"});
inline PartitionSpec Distributed::batch_spec(int rank) const { return trainer::batch_spec(rank, data_axes); }

}  // namespace t5x::trainer
