// The processes of a run and how they split the work: the (data, model) mesh
// from the partitioner bindings (t5x PjitPartitioner: num_partitions or
// model_parallel_submesh), this process's data shard (t5x get_data_layout),
// and the communicator over the processes that hold different data shards.
//
// Parallelism implemented here: DATA parallelism. Every process holds the
// whole (replicated) train state, computes the loss and gradients of its data
// shard, and the gradients are summed over the 'data' group. Processes that
// differ only in their 'model' coordinate read the same rows and compute the
// same values (the 'model' axis is replicated work, not tensor parallelism).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mesh/communicator.h"
#include "mesh/mesh.h"
#include "t5x/trainer/run_config.h"

namespace t5x::trainer {

struct Distributed {
  std::shared_ptr<Communicator> world;  // all processes
  std::shared_ptr<Communicator> data;   // processes with this one's 'model' coordinate
  std::shared_ptr<Mesh> mesh;
  int64_t data_shard = 0;
  int64_t num_data_shards = 1;

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

  // Sums `v` element-wise over the data group (in place).
  void sum_over_data(std::vector<double>& v) const;
  void sum_over_data(std::vector<float>& v) const;
  // Rank 0's value of `v` on every process.
  uint64_t broadcast(uint64_t v) const;
};

}  // namespace t5x::trainer
