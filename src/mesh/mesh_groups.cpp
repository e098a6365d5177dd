#include "mesh/mesh_groups.h"

#include <stdexcept>

#include "mesh/simulated_communicator.h"

namespace t5x {
namespace {

Mesh checked_mesh(const Mesh& mesh, const std::shared_ptr<Communicator>& world) {
  if (!world) throw std::invalid_argument("[mesh] MeshGroups needs a world communicator");
  return Mesh::for_processes(mesh.axis_sizes(), world->size(), world->rank(), mesh.axis_names());
}

}  // namespace

MeshGroups::MeshGroups(const Mesh& mesh, std::shared_ptr<Communicator> world)
    : mesh_(checked_mesh(mesh, world)), world_(std::move(world)) {
  const int n = mesh_.ndim();
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<std::string> axes;
    for (int a = 0; a < n; ++a)
      if (mask & (1 << a)) axes.push_back(mesh_.axis_names()[a]);
    over(axes);
  }
}

Communicator& MeshGroups::over(const std::vector<std::string>& axes) {
  auto it = groups_.find(axes);
  if (it != groups_.end()) return *it->second;
  std::shared_ptr<Communicator> comm;
  const int64_t dev = mesh_.device_id();
  if (axes.empty()) {
    comm = make_single_communicator();
  } else {
    // A pure function of the device: a simulated world (t5x partition) forms its groups alone.
    comm = split_by(*world_, [&](int d) {
      return std::pair<int, int>(int(mesh_.group_index(axes, d)), int(mesh_.rank_in_group(axes, d)));
    });
  }
  if (!comm || comm->rank() != mesh_.rank_in_group(axes, dev) || comm->size() != mesh_.axes_size(axes))
    throw std::runtime_error("[mesh] communicator split for a mesh group gave an unexpected rank/size");
  return *groups_.emplace(axes, std::move(comm)).first->second;
}

CommCounters MeshGroups::total_counters() const {
  CommCounters c = world_->counters();
  for (const auto& [axes, comm] : groups_) c += comm->counters();
  return c;
}

void MeshGroups::reset_counters() {
  world_->reset_counters();
  for (auto& [axes, comm] : groups_) comm->reset_counters();
}

}  // namespace t5x
