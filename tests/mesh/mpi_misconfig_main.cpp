// A deliberately misconfigured distributed job (run by ctest under mpiexec
// through expect_all_ranks_fail.cmake). Each rank must report the error itself
// and the job must exit non-zero promptly instead of hanging.
//   usage: mesh_mpi_misconfig count|divide|axis|partitions
#include <cstdio>
#include <exception>
#include <string>

#include "mesh/communicator.h"
#include "mesh/mesh_groups.h"
#include "mesh/partition_spec.h"

int main(int argc, char** argv) {
  using namespace t5x;
  auto world = init_communicator(CommBackend::kAny);
  const std::string which = argc > 1 ? argv[1] : "";
  const int n = world->size(), r = world->rank();
  try {
    if (which == "count") {
      MeshGroups groups(Mesh({2, 2}), world);  // needs 4 processes
    } else if (which == "partitions") {
      Mesh::from_partitioner(n, r, 3);  // 3 does not divide 4
    } else {
      MeshGroups groups(Mesh::from_partitioner(n, r, 2), world);
      PartitionSpec spec({{"data"}, {which == "axis" ? "modle" : "model"}});
      validate_partition_spec(groups.mesh().desc(), {{"batch", 8}, {"embed", 5}}, spec);
    }
    std::fprintf(stderr, "rank %d/%d: no error\n", r, n);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d/%d: error: %s\n", r, n, e.what());
    return 2;
  }
}
