// Internal: entry points of the MPI backend (mpi_backend.cpp, or
// mpi_backend_stub.cpp in builds without MPI). Use init_communicator().
#pragma once
#include <memory>

#include "mesh/communicator.h"

namespace t5x::detail {

bool mpi_backend_available();
// MPI_COMM_WORLD as a Communicator; initialises MPI on first use.
std::shared_ptr<Communicator> make_mpi_world();

}  // namespace t5x::detail
