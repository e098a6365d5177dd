// Single-process backend and the backend-neutral parts of Communicator
// (validation, bf16 staging, byte counters). Multi-process values are tested
// under mpiexec in mpi_collectives_test.cpp.
#include "mesh/communicator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "core/dtype_bf16.h"

namespace t5x {
namespace {

// A group of `k` members seen from rank `r` whose data movement is a no-op:
// enough to check the counters' ring formulas for k > 1 without processes.
class CountingOnly final : public Communicator {
 public:
  CountingOnly(int r, int k) : r_(r), k_(k) {}
  int rank() const override { return r_; }
  int size() const override { return k_; }
  std::string backend() const override { return "counting"; }
  std::shared_ptr<Communicator> split(int, int) override { return nullptr; }
  void barrier() override {}
  void abort(int) override {}
  int reduce_calls = 0;
  CommDtype last_dtype = CommDtype::kI32;

 protected:
  void do_all_reduce(const void*, void*, size_t, CommDtype d, ReduceOp) override { ++reduce_calls, last_dtype = d; }
  void do_all_gather(const void*, void*, size_t, CommDtype) override {}
  void do_reduce_scatter(const void*, void*, size_t, CommDtype d, ReduceOp) override { last_dtype = d; }
  void do_all_to_all(const void*, void*, size_t, CommDtype) override {}
  void do_permute(const void*, void*, size_t, CommDtype, int, int) override {}
  void do_broadcast(void*, size_t, CommDtype, int) override {}

 private:
  int r_, k_;
};

TEST(Communicator, SingleBackendCopies) {
  auto c = make_single_communicator();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  EXPECT_EQ(c->backend(), "single");
  std::vector<float> in{1, -2, 3}, out(3);
  c->all_reduce(in.data(), out.data(), 3, CommDtype::kF32, ReduceOp::kMax);
  EXPECT_EQ(out, in);
  std::vector<int64_t> li{5, 6}, lo(2);
  c->all_gather(li.data(), lo.data(), 2, CommDtype::kI64);
  EXPECT_EQ(lo, li);
  std::vector<double> di{1.5, 2.5}, dout(2);
  c->reduce_scatter(di.data(), dout.data(), 2, CommDtype::kF64);
  EXPECT_EQ(dout, di);
  std::vector<int32_t> ii{7, 8}, io(2);
  c->all_to_all(ii.data(), io.data(), 2, CommDtype::kI32);
  EXPECT_EQ(io, ii);
  c->permute(ii.data(), io.data(), 2, CommDtype::kI32, {});  // no source: zeros
  EXPECT_EQ(io, (std::vector<int32_t>{0, 0}));
  c->permute(ii.data(), io.data(), 2, CommDtype::kI32, {{0, 0}});
  EXPECT_EQ(io, ii);
  c->broadcast(ii.data(), 2, CommDtype::kI32, 0);
  EXPECT_EQ(ii, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(c->counters().total_bytes(), 0.0);  // k = 1 moves nothing
  EXPECT_EQ(c->counters().calls_of(Collective::kPermute), 2);
  auto sub = c->split(3, 0);
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(c->split(-1, 0), nullptr);
}

TEST(Communicator, Bf16ReductionsGoThroughF32) {
  CountingOnly c(0, 4);
  std::vector<bfloat16> b(3, bfloat16(1.5f)), o(3);
  c.all_reduce(b.data(), o.data(), 3, CommDtype::kBF16);
  EXPECT_EQ(c.last_dtype, CommDtype::kF32);
  for (auto v : o) EXPECT_EQ(float(v), 1.5f);  // no-op reduction leaves values intact
  std::vector<bfloat16> big(8, bfloat16(2.0f)), small(2);
  c.reduce_scatter(big.data(), small.data(), 2, CommDtype::kBF16);
  EXPECT_EQ(c.last_dtype, CommDtype::kF32);
  // Counters use the logical bf16 payload: 2*S*(k-1)/k with S = 6 bytes.
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kAllReduce), 2 * 6.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kReduceScatter), 4.0 * 3);
  auto single = make_single_communicator();
  std::vector<bfloat16> x{bfloat16(0.1f), bfloat16(-3.0f)}, y(2);
  single->all_reduce(x.data(), y.data(), 2, CommDtype::kBF16);
  EXPECT_EQ(y[0].bits, x[0].bits);
  EXPECT_EQ(y[1].bits, x[1].bits);
}

TEST(Communicator, RingByteFormulas) {
  const int k = 4;
  const size_t n = 1000;  // elements
  std::vector<float> a(n * k), b(n * k);
  CountingOnly c(1, k);
  c.all_reduce(a.data(), b.data(), n, CommDtype::kF32);
  c.all_gather(a.data(), b.data(), n, CommDtype::kF32);
  c.reduce_scatter(a.data(), b.data(), n, CommDtype::kF32);
  c.all_to_all(a.data(), b.data(), n, CommDtype::kF32);
  const double S = n * 4.0;
  const auto& ct = c.counters();
  EXPECT_DOUBLE_EQ(ct.bytes_of(Collective::kAllReduce), 2 * S * (k - 1) / k);
  EXPECT_DOUBLE_EQ(ct.bytes_of(Collective::kAllGather), S * (k - 1));
  EXPECT_DOUBLE_EQ(ct.bytes_of(Collective::kReduceScatter), (k * S) * (k - 1) / k);
  EXPECT_DOUBLE_EQ(ct.bytes_of(Collective::kAllToAll), (k * S) * (k - 1) / k);
  // all-reduce == reduce-scatter + all-gather in bytes (C0.2).
  EXPECT_DOUBLE_EQ(2 * S * (k - 1) / k, S / k * (k - 1) * 2);
  // permute: rank 1 sends only when it is a source with another destination.
  c.permute(a.data(), b.data(), n, CommDtype::kF32, {{1, 2}, {2, 1}});
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kPermute), S);
  c.permute(a.data(), b.data(), n, CommDtype::kF32, {{1, 1}});
  c.permute(a.data(), b.data(), n, CommDtype::kF32, {{0, 1}});
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kPermute), S);
  // broadcast from root 2 on a ring 2->3->0->1: rank 1 is last and sends nothing.
  c.broadcast(a.data(), n, CommDtype::kF32, 2);
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kBroadcast), 0.0);
  c.broadcast(a.data(), n, CommDtype::kF32, 1);
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kBroadcast), S);
  EXPECT_EQ(c.counters().calls_of(Collective::kBroadcast), 2);
  c.reset_counters();
  EXPECT_EQ(c.counters().total_bytes(), 0.0);
}

TEST(Communicator, PermuteZeroFillsRanksWithoutSource) {
  CountingOnly c(3, 4);
  std::vector<float> in(5, 1.f), out(5, 9.f);
  c.permute(in.data(), out.data(), 5, CommDtype::kF32, {{0, 1}, {1, 2}});
  EXPECT_EQ(out, std::vector<float>(5, 0.f));
}

TEST(Communicator, ArgumentErrors) {
  CountingOnly c(0, 4);
  std::vector<float> a(8), b(8);
  EXPECT_THROW(c.permute(a.data(), b.data(), 2, CommDtype::kF32, {{0, 1}, {0, 2}}), std::invalid_argument);
  EXPECT_THROW(c.permute(a.data(), b.data(), 2, CommDtype::kF32, {{0, 1}, {2, 1}}), std::invalid_argument);
  EXPECT_THROW(c.permute(a.data(), b.data(), 2, CommDtype::kF32, {{0, 4}}), std::invalid_argument);
  EXPECT_THROW(c.broadcast(a.data(), 2, CommDtype::kF32, 4), std::invalid_argument);
  EXPECT_THROW(c.all_gather(a.data(), a.data(), 2, CommDtype::kF32), std::invalid_argument);
  EXPECT_THROW(c.all_reduce(nullptr, b.data(), 2, CommDtype::kF32), std::invalid_argument);
  EXPECT_NO_THROW(c.all_reduce(a.data(), a.data(), 2, CommDtype::kF32));  // in-place is allowed
}

TEST(Communicator, AnyFallsBackToSingleOutsideMpirun) {
  if (launched_under_mpi()) GTEST_SKIP() << "running under mpirun";
  auto w = init_communicator(CommBackend::kAny);
  EXPECT_EQ(w->backend(), "single");
  EXPECT_EQ(w->size(), 1);
  EXPECT_EQ(init_communicator(CommBackend::kAny), w);  // same world every time
  EXPECT_EQ(init_communicator(CommBackend::kSingle), w);
}

TEST(Communicator, DtypeTable) {
  EXPECT_EQ(comm_dtype_size(CommDtype::kBF16), 2u);
  EXPECT_EQ(comm_dtype_size(CommDtype::kF64), 8u);
  EXPECT_EQ(comm_dtype_size(CommDtype::kI32), 4u);
  EXPECT_STREQ(comm_dtype_name(CommDtype::kBF16), "bfloat16");
  EXPECT_STREQ(collective_name(Collective::kReduceScatter), "reduce_scatter");
}

}  // namespace
}  // namespace t5x
