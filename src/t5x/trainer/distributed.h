// The processes of a run and how they split the work: the (data, model) mesh
// from the partitioner bindings (t5x PjitPartitioner: num_partitions or
// model_parallel_submesh), this process's data shard (t5x get_data_layout),
// the communicator over the processes that hold different data shards, and
// the spmd context over the processes of this process's data replica.
//
// Layout (t5x pjit with the standard logical-axis rules):
//   - 'data': process d of D feeds rows [d*B/D, (d+1)*B/D) of every global
//     batch.
//   - 'model': the M processes with the same data coordinate form one data
//     replica; parameters and optimizer slots are split over 'model' by their
//     logical axes (heads, mlp, vocab, joined_kv -> model) and every op of the
//     model runs through the spmd lowering (Megatron-style tensor parallelism).
// Two ways to run a step (docs/trainer.md, "One mesh"):
//   - one mesh (`one_mesh`, partitioner.mesh_invariant = False on more than
//     one process): `spmd` spans the whole (data, model) mesh. The batch is a
//     global Array split over 'data' (each process's rows are its shard),
//     parameters take their layout from the logical-axis rules
//     (parameter_partitioning_dims 2: embed -> data, ZeRO-3), activations
//     from activation_partitioning_dims, and the gradient sum over 'data'
//     comes out of the collectives' vjps (all-reduce, or reduce-scatter for
//     data-split parameters).
//   - per data replica (mesh_invariant = True, the bitwise mode): `spmd` is
//     the (data=1, model=M) mesh of this process's replica; each process runs
//     its rows as plain arrays and the gradients are summed over the data
//     group in a fixed pairwise order (sum_over_data), so D processes are one
//     process with num_microbatches = D bit for bit. The mesh-invariant
//     einsum keeps every sum whole, which on one mesh would gather the
//     activations over 'data' for each weight gradient; a deterministic
//     data-axis reduction in the collectives' vjps is still to be written.
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
  std::shared_ptr<Communicator> data;   // processes with this one's 'model' coordinate
  std::shared_ptr<Communicator> model;  // processes with this one's 'data' coordinate
  std::shared_ptr<Mesh> mesh;           // the (data, model) mesh of all processes
  std::shared_ptr<spmd::Context> spmd;  // the whole mesh over `world` (one_mesh), else (data=1, model=M) over `model`
  bool one_mesh = false;                // see above
  int64_t data_shard = 0;
  int64_t num_data_shards = 1;
  int64_t model_shard = 0;
  int64_t num_model_shards = 1;

  // True when parameters are split over a 'model' axis of more than one process.
  bool model_parallel() const { return num_model_shards > 1; }
  // True when the model runs through the spmd lowering on `spmd`'s mesh.
  bool spmd_active() const { return one_mesh || model_parallel(); }
  // This process's data coordinate outside `spmd`'s mesh (0 on one mesh):
  // only coordinate 0 writes the split leaves of a checkpoint.
  int64_t data_replica() const { return one_mesh ? 0 : data_shard; }

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
  // Sums `v` element-wise over the data group (in place).
  void sum_over_data(std::vector<double>& v) const;
  // float32 sums are formed pairwise in data-shard order, ((s0 + s1) + (s2 +
  // s3)), like accumulate_grads_microbatched's blocks: the same value on every
  // process and for any MPI reduction algorithm, so D processes with N/D
  // microbatches each equal one process with N when N/D is a power of two
  // (each process's sum is then a whole subtree of one process's). A ring
  // all-reduce's bytes (Communicator::all_reduce_pairwise).
  void sum_over_data(std::vector<float>& v) const;
  // Rank 0's value of `v` on every process.
  uint64_t broadcast(uint64_t v) const;
};

// P('data', None, ...) for an array of `rank` dims: a batch split over 'data'.
PartitionSpec batch_spec(int rank);

}  // namespace t5x::trainer
