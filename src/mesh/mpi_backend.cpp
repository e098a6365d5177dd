// MPI backend (OpenMPI): one communicator per group, MPI's own collectives.
// Errors are returned (MPI_ERRORS_RETURN) and rethrown as std::runtime_error
// naming the call, so a failing collective never silently aborts.
#include <mpi.h>

#include <climits>
#include <stdexcept>
#include <string>

#include "mesh/mpi_backend.h"

namespace t5x::detail {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string("[comm] ") + what + " failed: " + std::string(msg, len));
}

MPI_Datatype mpi_type(CommDtype d) {
  switch (d) {
    case CommDtype::kF32: return MPI_FLOAT;
    case CommDtype::kF64: return MPI_DOUBLE;
    case CommDtype::kI32: return MPI_INT32_T;
    case CommDtype::kI64: return MPI_INT64_T;
    case CommDtype::kBF16: return MPI_UINT16_T;  // data movement only
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

int count_of(size_t n) {
  if (n > size_t(INT_MAX))
    throw std::invalid_argument("[comm] buffer of " + std::to_string(n) + " elements exceeds MPI's int count");
  return int(n);
}

// Finalizes MPI at exit if this library initialised it.
struct MpiLifetime {
  bool owned = false;
  MpiLifetime() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owned = true;
    }
  }
  ~MpiLifetime() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owned && !fin) MPI_Finalize();
  }
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiCommunicator() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owned_ && !fin) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  std::shared_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), "MPI_Comm_split");
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_shared<MpiCommunicator>(sub, true);
  }
  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }
  void abort(int code) override { MPI_Abort(comm_, code); }

 protected:
  void do_all_reduce(const void* in, void* out, size_t n, CommDtype d, ReduceOp op) override {
    check(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, count_of(n), mpi_type(d), mpi_op(op), comm_),
          "MPI_Allreduce");
  }
  void do_all_gather(const void* in, void* out, size_t n, CommDtype d) override {
    check(MPI_Allgather(in, count_of(n), mpi_type(d), out, count_of(n), mpi_type(d), comm_), "MPI_Allgather");
  }
  void do_reduce_scatter(const void* in, void* out, size_t n, CommDtype d, ReduceOp op) override {
    count_of(n * size_t(size_));
    check(MPI_Reduce_scatter_block(in, out, count_of(n), mpi_type(d), mpi_op(op), comm_),
          "MPI_Reduce_scatter_block");
  }
  void do_all_to_all(const void* in, void* out, size_t n, CommDtype d) override {
    count_of(n * size_t(size_));
    check(MPI_Alltoall(in, count_of(n), mpi_type(d), out, count_of(n), mpi_type(d), comm_), "MPI_Alltoall");
  }
  void do_permute(const void* in, void* out, size_t n, CommDtype d, int send_to, int recv_from) override {
    check(MPI_Sendrecv(in, count_of(n), mpi_type(d), send_to < 0 ? MPI_PROC_NULL : send_to, 17, out,
                       count_of(n), mpi_type(d), recv_from < 0 ? MPI_PROC_NULL : recv_from, 17, comm_,
                       MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
  }
  void do_broadcast(void* buf, size_t n, CommDtype d, int root) override {
    check(MPI_Bcast(buf, count_of(n), mpi_type(d), root, comm_), "MPI_Bcast");
  }

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool mpi_backend_available() { return true; }

std::shared_ptr<Communicator> make_mpi_world() {
  static MpiLifetime lifetime;  // constructed once; finalizes at exit
  return std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, false);
}

}  // namespace t5x::detail
