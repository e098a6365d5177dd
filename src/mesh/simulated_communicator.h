// A communicator that stands for one member of a group whose other members
// do not exist: rank `rank` of `size`, in this process alone. Its collectives
// move no data between processes (each output is filled from this member's
// own input, so values stay finite and shapes stay right) but the byte
// counters of Communicator record exactly what the member would send under
// the ring model (communicator.h). `t5x partition` runs one training step of
// a simulated rank of an N-process mesh on it to report the bytes each
// collective of the spmd lowering sends (docs/sharding.md, "Partition report").
//
// Splitting needs every member's color, which a simulated member cannot ask
// for: groups are formed by split_by(), whose color and key are a pure
// function of the rank (as mesh groups are). split() itself throws.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "mesh/communicator.h"

namespace t5x {

class SimulatedCommunicator final : public Communicator {
 public:
  // Throws std::invalid_argument "[comm] ..." unless 0 <= rank < size.
  SimulatedCommunicator(int size, int rank);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "simulated"; }
  // Throws std::logic_error: use split_by.
  std::shared_ptr<Communicator> split(int color, int key) override;
  void barrier() override {}
  // Throws std::runtime_error (there is no job to tear down).
  void abort(int code) override;

 protected:
  void do_all_reduce(const void* in, void* out, size_t n, CommDtype d, ReduceOp op) override;
  void do_all_gather(const void* in, void* out, size_t n, CommDtype d) override;
  void do_reduce_scatter(const void* in, void* out, size_t n, CommDtype d, ReduceOp op) override;
  void do_all_to_all(const void* in, void* out, size_t n, CommDtype d) override;
  void do_permute(const void* in, void* out, size_t n, CommDtype d, int send_to, int recv_from) override;
  void do_broadcast(void* buf, size_t n, CommDtype d, int root) override;

 private:
  int size_, rank_;
};

// (color, key) of a member, for any member rank of the group being split.
using ColorKey = std::function<std::pair<int, int>(int rank)>;

// Communicator::split(color_key(comm.rank())) on a real communicator (a
// collective); on a SimulatedCommunicator, the group of the members whose
// color equals this one's, ranked by (key, rank), with no communication.
// A negative color gives nullptr, as split does.
std::shared_ptr<Communicator> split_by(Communicator& comm, const ColorKey& color_key);

}  // namespace t5x
