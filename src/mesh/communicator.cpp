#include "mesh/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "core/dtype_bf16.h"
#include "mesh/mpi_backend.h"
#include "mesh/pairwise_sum.h"

namespace t5x {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("[comm] " + msg); }

std::vector<float> bf16_to_f32(const void* p, size_t n) {
  std::vector<float> out(n);
  const auto* b = static_cast<const bfloat16*>(p);
  for (size_t i = 0; i < n; ++i) out[i] = float(b[i]);
  return out;
}

void f32_to_bf16(const std::vector<float>& v, void* p) {
  auto* b = static_cast<bfloat16*>(p);
  for (size_t i = 0; i < v.size(); ++i) b[i] = bfloat16(v[i]);
}

void check_buffers(const char* op, const void* in, const void* out, size_t n) {
  if (n > 0 && (!in || !out)) fail(std::string(op) + ": null buffer for " + std::to_string(n) + " elements");
}

// Size-1 group: every collective is a copy.
class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  std::shared_ptr<Communicator> split(int color, int) override {
    return color < 0 ? nullptr : std::make_shared<SingleCommunicator>();
  }
  void barrier() override {}
  void abort(int code) override { std::_Exit(code); }

 protected:
  void do_all_reduce(const void* in, void* out, size_t n, CommDtype d, ReduceOp) override { copy(in, out, n, d); }
  void do_all_gather(const void* in, void* out, size_t n, CommDtype d) override { copy(in, out, n, d); }
  void do_reduce_scatter(const void* in, void* out, size_t n, CommDtype d, ReduceOp) override { copy(in, out, n, d); }
  void do_all_to_all(const void* in, void* out, size_t n, CommDtype d) override { copy(in, out, n, d); }
  void do_permute(const void* in, void* out, size_t n, CommDtype d, int send_to, int recv_from) override {
    if (recv_from == 0) copy(in, out, n, d);
  }
  void do_broadcast(void*, size_t, CommDtype, int) override {}

 private:
  static void copy(const void* in, void* out, size_t n, CommDtype d) {
    if (in != out && n) std::memmove(out, in, n * comm_dtype_size(d));
  }
};

}  // namespace

size_t comm_dtype_size(CommDtype d) {
  switch (d) {
    case CommDtype::kF32: return 4;
    case CommDtype::kF64: return 8;
    case CommDtype::kI32: return 4;
    case CommDtype::kI64: return 8;
    case CommDtype::kBF16: return 2;
  }
  return 0;
}

const char* comm_dtype_name(CommDtype d) {
  switch (d) {
    case CommDtype::kF32: return "float32";
    case CommDtype::kF64: return "float64";
    case CommDtype::kI32: return "int32";
    case CommDtype::kI64: return "int64";
    case CommDtype::kBF16: return "bfloat16";
  }
  return "?";
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kPermute: return "permute";
    case Collective::kBroadcast: return "broadcast";
  }
  return "?";
}

double CommCounters::total_bytes() const {
  double t = 0;
  for (double b : bytes) t += b;
  return t;
}

CommCounters& CommCounters::operator+=(const CommCounters& o) {
  for (int i = 0; i < kNumCollectives; ++i) {
    bytes[i] += o.bytes[i];
    calls[i] += o.calls[i];
  }
  return *this;
}

void Communicator::count(Collective c, double bytes) {
  counters_.bytes[int(c)] += bytes;
  counters_.calls[int(c)] += 1;
}

void Communicator::all_reduce(const void* in, void* out, size_t n, CommDtype dtype, ReduceOp op) {
  check_buffers("all_reduce", in, out, n);
  const double k = size(), S = double(n * comm_dtype_size(dtype));
  if (dtype == CommDtype::kBF16) {
    std::vector<float> tmp = bf16_to_f32(in, n);
    do_all_reduce(tmp.data(), tmp.data(), n, CommDtype::kF32, op);
    f32_to_bf16(tmp, out);
  } else {
    do_all_reduce(in, out, n, dtype, op);
  }
  count(Collective::kAllReduce, 2 * S * (k - 1) / k);
}

void Communicator::all_gather(const void* in, void* out, size_t n, CommDtype dtype) {
  check_buffers("all_gather", in, out, n);
  if (in == out && size() > 1) fail("all_gather: input and output must not alias");
  do_all_gather(in, out, n, dtype);
  count(Collective::kAllGather, double(n * comm_dtype_size(dtype)) * (size() - 1));
}

void Communicator::reduce_scatter(const void* in, void* out, size_t n, CommDtype dtype, ReduceOp op) {
  check_buffers("reduce_scatter", in, out, n);
  if (in == out && size() > 1) fail("reduce_scatter: input and output must not alias");
  if (dtype == CommDtype::kBF16) {
    std::vector<float> tin = bf16_to_f32(in, n * size()), tout(n);
    do_reduce_scatter(tin.data(), tout.data(), n, CommDtype::kF32, op);
    f32_to_bf16(tout, out);
  } else {
    do_reduce_scatter(in, out, n, dtype, op);
  }
  count(Collective::kReduceScatter, double(n * comm_dtype_size(dtype)) * (size() - 1));
}

void Communicator::all_to_all(const void* in, void* out, size_t n, CommDtype dtype) {
  check_buffers("all_to_all", in, out, n);
  if (in == out && size() > 1) fail("all_to_all: input and output must not alias");
  do_all_to_all(in, out, n, dtype);
  count(Collective::kAllToAll, double(n * comm_dtype_size(dtype)) * (size() - 1));
}

void Communicator::all_reduce_pairwise(float* buf, size_t n) {
  const size_t k = size_t(size());
  if (k <= 1 || n == 0) return;
  if (k == 2) {  // a + b: the same bits whatever the algorithm
    all_reduce(buf, buf, n, CommDtype::kF32);
    return;
  }
  // Pieces of at most k * kBlock elements bound the scratch memory; member r
  // owns block r of each piece (the last block zero-padded).
  constexpr size_t kBlock = size_t(1) << 16;
  std::vector<float> send, recv;
  using Block = std::vector<float>;
  for (size_t off = 0; off < n; off += k * kBlock) {
    const size_t len = std::min(k * kBlock, n - off), c = (len + k - 1) / k;
    send.assign(k * c, 0.0f);
    std::copy(buf + off, buf + off + len, send.begin());
    recv.resize(k * c);
    all_to_all(send.data(), recv.data(), c, CommDtype::kF32);  // recv block i: member i's block r
    Block sum = sum_pairwise<Block>(
        int64_t(k),
        [&](int64_t i) { return Block(recv.begin() + std::ptrdiff_t(size_t(i) * c), recv.begin() + std::ptrdiff_t(size_t(i + 1) * c)); },
        [](Block& left, const Block& right) {
          for (size_t j = 0; j < left.size(); ++j) left[j] += right[j];
        });
    all_gather(sum.data(), send.data(), c, CommDtype::kF32);
    std::copy(send.begin(), send.begin() + std::ptrdiff_t(len), buf + off);
  }
}

void Communicator::permute(const void* in, void* out, size_t n, CommDtype dtype,
                           const std::vector<std::pair<int, int>>& pairs) {
  check_buffers("permute", in, out, n);
  if (in == out) fail("permute: input and output must not alias");
  int send_to = -1, recv_from = -1;
  std::vector<char> src_seen(size(), 0), dst_seen(size(), 0);
  for (auto [s, d] : pairs) {
    if (s < 0 || s >= size() || d < 0 || d >= size())
      fail("permute: pair (" + std::to_string(s) + ", " + std::to_string(d) + ") is outside the group of size " +
           std::to_string(size()));
    if (src_seen[s]++) fail("permute: rank " + std::to_string(s) + " is the source of two pairs");
    if (dst_seen[d]++) fail("permute: rank " + std::to_string(d) + " is the destination of two pairs");
    if (s == rank()) send_to = d;
    if (d == rank()) recv_from = s;
  }
  if (recv_from < 0 && n) std::memset(out, 0, n * comm_dtype_size(dtype));
  do_permute(in, out, n, dtype, send_to, recv_from);
  count(Collective::kPermute, (send_to >= 0 && send_to != rank()) ? double(n * comm_dtype_size(dtype)) : 0.0);
}

void Communicator::broadcast(void* buf, size_t n, CommDtype dtype, int root) {
  if (n > 0 && !buf) fail("broadcast: null buffer");
  if (root < 0 || root >= size())
    fail("broadcast: root " + std::to_string(root) + " is outside the group of size " + std::to_string(size()));
  do_broadcast(buf, n, dtype, root);
  const int last = (root + size() - 1) % size();
  count(Collective::kBroadcast, (size() > 1 && rank() != last) ? double(n * comm_dtype_size(dtype)) : 0.0);
}

bool launched_under_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_SIZE");
}

bool mpi_available() { return detail::mpi_backend_available(); }

std::shared_ptr<Communicator> make_single_communicator() { return std::make_shared<SingleCommunicator>(); }

std::shared_ptr<Communicator> init_communicator(CommBackend backend) {
  static std::mutex mu;
  static std::shared_ptr<Communicator> world_single, world_mpi;
  std::lock_guard<std::mutex> lock(mu);
  if (backend == CommBackend::kAny && launched_under_mpi() && !mpi_available()) {
    // N copies each believing it is rank 0 of 1 would silently compute N
    // unsharded runs; refuse unless the launch is a single process.
    const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = std::getenv("PMI_SIZE");
    if (n && std::atoi(n) > 1)
      fail("launched by mpirun with " + std::string(n) +
           " processes, but this build has no MPI backend (install libopenmpi-dev and reconfigure)");
  }
  bool use_mpi = backend == CommBackend::kMpi ||
                 (backend == CommBackend::kAny && launched_under_mpi() && mpi_available());
  if (use_mpi) {
    if (!mpi_available())
      fail("the MPI backend was requested but this build has no MPI (install libopenmpi-dev and reconfigure)");
    if (!world_mpi) world_mpi = detail::make_mpi_world();
    return world_mpi;
  }
  if (!world_single) world_single = make_single_communicator();
  return world_single;
}

}  // namespace t5x
