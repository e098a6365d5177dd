// `t5x partition`: what one process of an N-process run holds and sends per
// training step, for a gin config and a mesh, without the other processes
// and without data (docs/sharding.md, "Partition report"; issue 17 item 5).
//
// How: this process plays one rank of the N-process world on a
// SimulatedCommunicator (mesh/simulated_communicator.h). Distributed::create
// and spmd::Context build the real mesh groups on it, a Trainer runs ONE real
// train_step of the one-mesh mode (partitioning.PjitPartitioner.mesh_invariant
// = False) on this rank's shards of zero-valued parameters and a synthetic
// batch (every token 1, the feature converter's model features and lengths),
// and the communicators' byte counters record what every collective the spmd
// planner chose would send (the ring model of communicator.h). So the bytes
// come from the lowering itself, with the kernels run on local shapes: the
// same code path as a real run, minus the other processes.
//
// Models too large for one step on this machine: with `extrapolate_layers`
// the step runs on 1+1, 2+1 and 1+2 (encoder + decoder) layer variants and
// every count is extended linearly to the configured layer counts (layers
// have identical shapes, hence identical plans: exact for parameters,
// optimizer state and communication; the step's memory peak is an estimate).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mesh/communicator.h"
#include "t5x/trainer/distributed.h"
#include "t5x/trainer/run_config.h"

namespace t5x::trainer {

struct PartitionOptions {
  // (data, model) sizes; empty: the partitioner's num_partitions /
  // model_parallel_submesh over `processes`.
  std::vector<int64_t> mesh;
  int64_t processes = 0;  // with an empty `mesh`; 0: error
  int rank = 0;           // the simulated process
  bool extrapolate_layers = false;
};

struct PartitionReport {
  std::string mesh;  // "(data=2, model=2)"
  int64_t processes = 1;
  int rank = 0;
  std::string how;  // "one step" or the layer variants extrapolated from
  // This process, in bytes (its local shards).
  double param_bytes = 0, optimizer_bytes = 0;
  // One process holding everything (the same config on mesh (1, 1)).
  double param_bytes_one = 0, optimizer_bytes_one = 0;
  // High-water mark of live buffers during the step minus what was live
  // before it (parameters, optimizer state, batch): activations kept for the
  // backward pass, gradients and temporaries (core/allocator.h counters).
  double step_peak_bytes = 0;
  // Bytes this process sends in one training step, per collective (ring
  // model), and the calls.
  CommCounters step;
  // The same bytes by the mesh axes of the group that sent them ("data",
  // "model", "data,model"; "other": the world (e.g. the trainer's
  // finite-update check), the trainer's data and model groups, and groups
  // over other axis orders).
  std::map<std::string, CommCounters> step_by_axes;
  int64_t local_batch_rows = 0;
  std::string layout;  // the Trainer's startup line

  double state_fraction() const {
    return (param_bytes + optimizer_bytes) / (param_bytes_one + optimizer_bytes_one);
  }
  std::string to_string() const;
};

// The bytes sent by this process through every communicator of `d` (the spmd
// context's mesh groups, the world, and the data and model groups).
CommCounters step_counters(const Distributed& d);
// step_counters(d) by the axes of the sending group (PartitionReport::step_by_axes).
std::map<std::string, CommCounters> step_counters_by_axes(const Distributed& d);
void reset_step_counters(const Distributed& d);

// Throws std::invalid_argument "[partition] ..." for a mesh that does not fit
// (sizes, rank), or a step whose loss is not finite.
PartitionReport partition_report(const TrainRunConfig& cfg, const PartitionOptions& o);

// "data=256,model=8" -> {256, 8}; throws "[partition] --mesh=...: ..." otherwise.
std::vector<int64_t> parse_mesh_flag(const std::string& value);

}  // namespace t5x::trainer
