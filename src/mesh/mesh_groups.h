// A Mesh bound to a world Communicator: one communicator per group over any
// subset of mesh axes (the communicator split per mesh-axis group).
//
// The world group must have exactly mesh.num_devices() members and this
// process's world rank is its device id (one device per process). The
// communicator for axes A contains the devices that differ only on A, ranked
// row-major over A in the order given (see Mesh::group), so its rank equals
// the shard index of a dim split over A.
//
// Communicators for every subset of axes in mesh order are created in the
// constructor (a collective over the world group: all processes must construct
// their MeshGroups together). Other axis orders are split on first use, which
// is then collective too; SPMD programs ask in the same order on every rank.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mesh/communicator.h"
#include "mesh/mesh.h"

namespace t5x {

class MeshGroups {
 public:
  // Throws "[mesh] mesh (data=2, model=2) needs 4 devices but 3 processes are
  // running" when the sizes differ (on every rank: the check is local).
  MeshGroups(const Mesh& mesh, std::shared_ptr<Communicator> world);

  // `mesh` described from the world rank's point of view.
  const Mesh& mesh() const { return mesh_; }
  Communicator& world() { return *world_; }
  // Group over `axes` (empty = a group of one: this device alone).
  Communicator& over(const std::vector<std::string>& axes);

  // Sum of the counters of every communicator this object owns (the world
  // group included), i.e. the bytes this process sent.
  CommCounters total_counters() const;
  void reset_counters();

 private:
  Mesh mesh_;
  std::shared_ptr<Communicator> world_;
  std::map<std::vector<std::string>, std::shared_ptr<Communicator>> groups_;
};

}  // namespace t5x
