// The processes of a run and how they split the work: the (data, model) mesh
// from the partitioner bindings (t5x PjitPartitioner: num_partitions or
// model_parallel_submesh), this process's data shard (t5x get_data_layout),
// the communicator over the processes that hold different data shards, and
// the spmd context over the processes of this process's data replica.
//
// Layout (t5x pjit with the standard logical-axis rules, 1-D parameters):
//   - 'data': process d of D feeds rows [d*B/D, (d+1)*B/D) of every global
//     batch; the gradients are summed over the data group (`data`).
//   - 'model': the M processes with the same data coordinate form one data
//     replica. Its spmd context (`spmd`, mesh (data=1, model=M)) splits the
//     parameters and optimizer slots over 'model' by their logical axes
//     (heads, mlp, vocab, joined_kv -> model) and every op of the model runs
//     through the spmd lowering (Megatron-style tensor parallelism).
// The batch is split over 'data' outside the spmd lowering (each process
// feeds its rows as plain arrays) because some ops of the models (rename,
// comparisons, gated_gelu) are not yet routed to the lowering by the op layer.
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
  std::shared_ptr<spmd::Context> spmd;  // mesh (data=1, model=M) over `model`
  int64_t data_shard = 0;
  int64_t num_data_shards = 1;
  int64_t model_shard = 0;
  int64_t num_model_shards = 1;

  // True when parameters are split over a 'model' axis of more than one process.
  bool model_parallel() const { return num_model_shards > 1; }

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

}  // namespace t5x::trainer
