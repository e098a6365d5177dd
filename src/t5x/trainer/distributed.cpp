#include "t5x/trainer/distributed.h"

#include <algorithm>

#include "mesh/simulated_communicator.h"

namespace t5x::trainer {

Distributed Distributed::create(const PartitionerConfig& p) { return create(p, init_communicator()); }

Distributed Distributed::create(const PartitionerConfig& p, std::shared_ptr<Communicator> world) {
  Distributed d;
  d.world = std::move(world);
  d.mesh = std::make_shared<Mesh>(
      p.moe() ? Mesh::for_moe(d.world->size(), d.world->rank(), p.num_expert_partitions, p.num_partitions,
                              p.model_parallel_submesh)
              : Mesh::from_partitioner(d.world->size(), d.world->rank(), p.num_partitions, p.model_parallel_submesh));
  // t5x MoePjitPartitioner: data_partition_spec P(('expert', 'data')), so
  // shard_id = expert coordinate * |data| + data coordinate.
  if (p.moe()) d.data_axes = {"expert", "data"};
  const std::vector<std::string>& data_axes = d.data_axes;
  d.num_data_shards = d.mesh->axes_size(data_axes);
  d.data_shard = d.mesh->rank_in_group(data_axes, d.world->rank());
  const std::vector<std::string> model_axes = {"model"};
  d.num_model_shards = d.mesh->axes_size(model_axes);
  d.model_shard = d.mesh->rank_in_group(model_axes, d.world->rank());
  if (d.world->size() == 1) {
    d.data = d.model = d.world;
  } else {
    // Colors as functions of the rank, so that a simulated world (t5x partition) splits alone.
    const Mesh& m = *d.mesh;
    d.data = split_by(*d.world, [&](int r) {
      return std::pair<int, int>(int(m.group_index(data_axes, r)), int(m.rank_in_group(data_axes, r)));
    });
    d.model = split_by(*d.world, [&](int r) {
      return std::pair<int, int>(int(m.rank_in_group(data_axes, r)), int(m.rank_in_group(model_axes, r)));
    });
  }
  d.one_mesh = d.world->size() > 1;
  d.spmd = std::make_shared<spmd::Context>(*d.mesh, d.world);
  d.spmd->set_mesh_invariant(p.mesh_invariant);
  if (d.one_mesh && p.mesh_invariant) {
    d.replica = std::make_shared<spmd::Context>(Mesh({1, d.num_model_shards}, {"data", "model"}, d.model_shard), d.model);
    d.replica->set_mesh_invariant(true);
  }
  return d;
}

int64_t Distributed::min_over_world(int64_t v) const {
  if (world->size() > 1) world->all_reduce(&v, &v, 1, CommDtype::kI64, ReduceOp::kMin);
  return v;
}

void Distributed::sum_over_data(std::vector<double>& v) const {
  if (data->size() > 1 && !v.empty()) data->all_reduce(v.data(), v.data(), v.size(), CommDtype::kF64);
}

uint64_t Distributed::broadcast(uint64_t v) const {
  if (world->size() == 1) return v;
  int64_t x = static_cast<int64_t>(v);
  world->broadcast(&x, 1, CommDtype::kI64, 0);
  return static_cast<uint64_t>(x);
}

PartitionSpec batch_spec(int rank, const std::vector<std::string>& data_axes) {
  std::vector<std::vector<std::string>> dims(size_t(std::max(rank, 1)));
  dims[0] = data_axes;
  return PartitionSpec(dims);
}

int64_t Distributed::num_expert_shards() const {
  const int i = mesh->desc().axis_index("expert");
  return i < 0 ? 1 : mesh->axis_sizes()[size_t(i)];
}

}  // namespace t5x::trainer
