// Communication groups and collectives on raw typed buffers.
//
// A Communicator is one group of processes (like MLX's distributed::Group or
// an MPI communicator): rank() in [0, size()), split() into sub-groups, and
// collectives. Every member must call the same collectives in the same order
// (SPMD). Backends: "single" (size 1, always available) and "mpi" (OpenMPI,
// multi-process and multi-host); NCCL can slot in by implementing the
// protected do_* hooks.
//
// Semantics over a group of k members (sharding.md section 0):
//   all_reduce(in[n]) -> out[n]               every member gets op over members
//   all_gather(in[n]) -> out[k*n]             concat in member-rank order
//   reduce_scatter(in[k*n]) -> out[n]         member r gets block r of the sum
//   all_to_all(in[k*n]) -> out[k*n]           block j of member i goes to block i of member j
//   permute(in[n], pairs) -> out[n]           out of dst = in of src for each (src,dst);
//                                             a member that is no pair's dst gets zeros
//   broadcast(buf[n], root)                   everyone gets root's buffer
// `n` counts elements. in == out is allowed for all_reduce only.
// bf16 reductions accumulate in f32 (MTF casts bf16 groups > 8; we always do).
//
// Byte counters record the bytes THIS rank sends under the ring algorithms of
// sharding.md section 0, with S = n * sizeof(dtype) (the logical payload; the
// MPI backend's f32 staging of bf16 reductions is not counted twice):
//   all_reduce      2*S*(k-1)/k
//   all_gather      S*(k-1)          (S = this member's input)
//   reduce_scatter  S_out*(k-1)      (= S_in*(k-1)/k)
//   all_to_all      S_in*(k-1)/k
//   permute         S for each pair (rank -> other) this rank is the source of
//   broadcast       S unless this rank is last on the ring that starts at root
//                   (a pipelined ring: k-1 sends of S in total)
// Counters are doubles because the ring formulas are fractional.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace t5x {

enum class CommDtype { kF32, kF64, kI32, kI64, kBF16 };
enum class ReduceOp { kSum, kMax, kMin };
enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kPermute, kBroadcast };
constexpr int kNumCollectives = 6;

size_t comm_dtype_size(CommDtype dtype);
const char* comm_dtype_name(CommDtype dtype);
const char* collective_name(Collective c);

struct CommCounters {
  std::array<double, kNumCollectives> bytes{};  // bytes sent by this rank, ring model
  std::array<int64_t, kNumCollectives> calls{};

  double bytes_of(Collective c) const { return bytes[int(c)]; }
  int64_t calls_of(Collective c) const { return calls[int(c)]; }
  double total_bytes() const;
  CommCounters& operator+=(const CommCounters& o);
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // Collective over this group: members with equal `color` form a new group,
  // ranked by (key, old rank). color < 0 means "no group": returns nullptr.
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;
  virtual void barrier() = 0;
  // Tears down every process of the job (MPI_Abort); for fatal errors seen by
  // only some ranks, where returning would leave the others waiting.
  virtual void abort(int code) = 0;

  void all_reduce(const void* in, void* out, size_t n, CommDtype dtype, ReduceOp op = ReduceOp::kSum);
  void all_gather(const void* in, void* out, size_t n, CommDtype dtype);
  void reduce_scatter(const void* in, void* out, size_t n, CommDtype dtype, ReduceOp op = ReduceOp::kSum);
  void all_to_all(const void* in, void* out, size_t n_per_member, CommDtype dtype);
  // pairs: (src, dst) group ranks; each src and each dst appears at most once.
  void permute(const void* in, void* out, size_t n, CommDtype dtype,
               const std::vector<std::pair<int, int>>& pairs);
  void broadcast(void* buf, size_t n, CommDtype dtype, int root);
  // In-place float32 sum over the members in one fixed order: each element
  // is the members' values added by sum_pairwise (mesh/pairwise_sum.h) in
  // member-rank order, ((m0 + m1) + (m2 + m3)) ..., so the result is the same
  // bits on every member, for any backend and any MPI reduction algorithm,
  // and equals a one-process sum of the same blocks (microbatches). Runs as
  // an all_to_all (member r gathers everyone's block r and adds it) and an
  // all_gather of the sums: 2*S*(k-1)/k bytes, a ring all-reduce's, counted
  // under those two collectives (plus padding to a multiple of k per piece).
  void all_reduce_pairwise(float* buf, size_t n);

  const CommCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = CommCounters{}; }

 protected:
  // Backends implement these for kF32/kF64/kI32/kI64 reductions (bf16 arrives
  // as f32) and any dtype for data movement. Arguments are already validated.
  virtual void do_all_reduce(const void* in, void* out, size_t n, CommDtype dtype, ReduceOp op) = 0;
  virtual void do_all_gather(const void* in, void* out, size_t n, CommDtype dtype) = 0;
  virtual void do_reduce_scatter(const void* in, void* out, size_t n, CommDtype dtype, ReduceOp op) = 0;
  virtual void do_all_to_all(const void* in, void* out, size_t n, CommDtype dtype) = 0;
  virtual void do_permute(const void* in, void* out, size_t n, CommDtype dtype, int send_to, int recv_from) = 0;
  virtual void do_broadcast(void* buf, size_t n, CommDtype dtype, int root) = 0;

 private:
  void count(Collective c, double bytes);
  CommCounters counters_;
};

enum class CommBackend { kAny, kSingle, kMpi };

// True when launched by mpirun/mpiexec (OMPI_COMM_WORLD_SIZE, PMIX_RANK or
// PMI_SIZE set in the environment).
bool launched_under_mpi();
// True when this build includes the MPI backend.
bool mpi_available();

// The world group. kAny: MPI when launched under mpirun and the build has MPI,
// single-process otherwise (an error if mpirun started several processes but
// the build has no MPI). kMpi: MPI or an error "[comm] ..." when the build
// lacks it. Repeated calls return the same world group. The MPI backend calls
// MPI_Init_thread(MPI_THREAD_FUNNELED) once and MPI_Finalize at exit.
std::shared_ptr<Communicator> init_communicator(CommBackend backend = CommBackend::kAny);

// A fresh single-process group (size 1); collectives copy.
std::shared_ptr<Communicator> make_single_communicator();

}  // namespace t5x
