#include "mesh/simulated_communicator.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace t5x {

SimulatedCommunicator::SimulatedCommunicator(int size, int rank) : size_(size), rank_(rank) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("[comm] simulated member " + std::to_string(rank) + " of a group of " +
                                std::to_string(size) + ": the rank must lie in [0, size)");
}

std::shared_ptr<Communicator> SimulatedCommunicator::split(int, int) {
  throw std::logic_error("[comm] a simulated communicator cannot ask the other members for their colors; "
                         "split it with split_by (mesh/simulated_communicator.h)");
}

void SimulatedCommunicator::abort(int code) {
  throw std::runtime_error("[comm] simulated member " + std::to_string(rank_) + " of " + std::to_string(size_) +
                           " aborted with code " + std::to_string(code));
}

// Outputs come from this member's own input: as if every member held the
// same values (a sum then reads as one member's value; nothing overflows).
void SimulatedCommunicator::do_all_reduce(const void* in, void* out, size_t n, CommDtype d, ReduceOp) {
  if (in != out && n) std::memmove(out, in, n * comm_dtype_size(d));
}

void SimulatedCommunicator::do_all_gather(const void* in, void* out, size_t n, CommDtype d) {
  const size_t b = n * comm_dtype_size(d);
  for (int j = 0; j < size_ && b; ++j) std::memcpy(static_cast<char*>(out) + size_t(j) * b, in, b);
}

void SimulatedCommunicator::do_reduce_scatter(const void* in, void* out, size_t n, CommDtype d, ReduceOp) {
  const size_t b = n * comm_dtype_size(d);
  if (b) std::memcpy(out, static_cast<const char*>(in) + size_t(rank_) * b, b);
}

void SimulatedCommunicator::do_all_to_all(const void* in, void* out, size_t n, CommDtype d) {
  const size_t b = n * comm_dtype_size(d) * size_t(size_);
  if (b) std::memcpy(out, in, b);
}

void SimulatedCommunicator::do_permute(const void* in, void* out, size_t n, CommDtype d, int, int recv_from) {
  if (recv_from >= 0 && n) std::memcpy(out, in, n * comm_dtype_size(d));
}

void SimulatedCommunicator::do_broadcast(void*, size_t, CommDtype, int) {}

std::shared_ptr<Communicator> split_by(Communicator& comm, const ColorKey& color_key) {
  const auto [color, key] = color_key(comm.rank());
  auto* sim = dynamic_cast<SimulatedCommunicator*>(&comm);
  if (!sim) return comm.split(color, key);
  if (color < 0) return nullptr;
  std::vector<std::tuple<int, int>> members;  // (key, rank) of this color
  for (int r = 0; r < comm.size(); ++r) {
    const auto [c, k] = color_key(r);
    if (c == color) members.emplace_back(k, r);
  }
  std::sort(members.begin(), members.end());
  const auto me = std::find(members.begin(), members.end(), std::tuple<int, int>(key, comm.rank()));
  return std::make_shared<SimulatedCommunicator>(int(members.size()), int(me - members.begin()));
}

}  // namespace t5x
