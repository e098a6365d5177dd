// Builds without MPI: the backend reports itself unavailable.
#include <stdexcept>

#include "mesh/mpi_backend.h"

namespace t5x::detail {

bool mpi_backend_available() { return false; }

std::shared_ptr<Communicator> make_mpi_world() {
  throw std::invalid_argument("[comm] this build has no MPI backend");
}

}  // namespace t5x::detail
