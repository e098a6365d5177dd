// Distributed tests: run under `mpiexec -np N` (N = 1, 2, 4, 8) by ctest.
// Every mesh shape with N devices among (1x1) (2x1) (1x2) (2x2) (4x1) (1x4)
// (4x2) (2x4) is tested: each collective on every axis group, the byte
// counters against the ring formulas (sharding.md section 0), and resharding
// between every pair of layouts against the unsharded array.
// Assertions that could differ between ranks are non-fatal (EXPECT_*), so all
// ranks keep calling the same collectives and a failure never turns into a hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "core/dtype_bf16.h"
#include "mesh/communicator.h"
#include "mesh/logical_axis_rules.h"
#include "mesh/mesh_groups.h"
#include "mesh/pairwise_sum.h"
#include "mesh/reshard.h"
#include "../common/mpi_gtest_main.h"

namespace t5x {
namespace {

std::shared_ptr<Communicator> g_world;

std::vector<Mesh> meshes_for_world() {
  std::vector<Mesh> out;
  const int n = g_world->size();
  for (auto [d, m] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 4}, {4, 2}, {2, 4}})
    if (d * m == n) out.push_back(Mesh({d, m}, {"data", "model"}, g_world->rank()));
  if (n == 8) out.push_back(Mesh({2, 2, 2}, {"replica", "data", "model"}, g_world->rank()));
  return out;
}

// Every single axis, all axes in mesh order and reversed, and for 3-axis
// meshes a non-adjacent pair.
std::vector<std::vector<std::string>> axis_sets(const Mesh& mesh) {
  std::vector<std::vector<std::string>> sets;
  for (const auto& a : mesh.axis_names()) sets.push_back({a});
  sets.push_back(mesh.axis_names());
  sets.push_back({mesh.axis_names().rbegin(), mesh.axis_names().rend()});
  if (mesh.ndim() == 3) sets.push_back({mesh.axis_names()[2], mesh.axis_names()[0]});
  return sets;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// Value of element i of device `dev`'s buffer: small integers, exact in every dtype.
double value(int64_t dev, size_t i) { return double((dev * 7 + int64_t(i) * 3) % 23) - 11.0; }

template <typename T>
std::vector<T> buffer(int64_t dev, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = T(float(value(dev, i)));
  return v;
}

template <typename T>
double as_double(T v) { return double(float(v)); }
template <>
double as_double<double>(double v) { return v; }
template <>
double as_double<int64_t>(int64_t v) { return double(v); }

bool near(double got, double want, double rel) { return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want)); }

template <typename T>
void check_collectives_typed(Communicator& comm, const std::vector<int64_t>& members, CommDtype dt, const char* tag) {
  const int k = comm.size(), r = comm.rank();
  const int64_t dev = members[r];
  const size_t n = 6;
  const double es = double(comm_dtype_size(dt));
  SCOPED_TRACE(std::string(tag) + " " + comm_dtype_name(dt) + " k=" + std::to_string(k));
  comm.reset_counters();

  // all_reduce: sum, max, min.
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    std::vector<T> in = buffer<T>(dev, n), out(n);
    comm.all_reduce(in.data(), out.data(), n, dt, op);
    for (size_t i = 0; i < n; ++i) {
      double want = op == ReduceOp::kSum ? 0.0 : value(members[0], i);
      for (int64_t m : members) {
        double v = value(m, i);
        want = op == ReduceOp::kSum ? want + v : op == ReduceOp::kMax ? std::max(want, v) : std::min(want, v);
      }
      EXPECT_EQ(as_double(out[i]), want) << "all_reduce op " << int(op) << " i=" << i;
    }
  }
  // In place.
  {
    std::vector<T> buf = buffer<T>(dev, n);
    comm.all_reduce(buf.data(), buf.data(), n, dt);
    double want = 0;
    for (int64_t m : members) want += value(m, 0);
    EXPECT_EQ(as_double(buf[0]), want);
  }
  // all_gather: member order.
  {
    std::vector<T> in = buffer<T>(dev, n), out(n * k);
    comm.all_gather(in.data(), out.data(), n, dt);
    for (int m = 0; m < k; ++m)
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(as_double(out[m * n + i]), value(members[m], i)) << "all_gather";
  }
  // reduce_scatter: block r of the sum.
  {
    std::vector<T> in = buffer<T>(dev, n * k), out(n);
    comm.reduce_scatter(in.data(), out.data(), n, dt);
    for (size_t i = 0; i < n; ++i) {
      double want = 0;
      for (int64_t m : members) want += value(m, r * n + i);
      EXPECT_EQ(as_double(out[i]), want) << "reduce_scatter i=" << i;
    }
  }
  // all_to_all: block j of member i lands in block i of member j.
  {
    std::vector<T> in = buffer<T>(dev, n * k), out(n * k);
    comm.all_to_all(in.data(), out.data(), n, dt);
    for (int m = 0; m < k; ++m)
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(as_double(out[m * n + i]), value(members[m], r * n + i)) << "all_to_all";
  }
  // permute: ring shift by one, then a single pair (others get zeros).
  {
    std::vector<std::pair<int, int>> ring;
    for (int m = 0; m < k; ++m) ring.push_back({m, (m + 1) % k});
    std::vector<T> in = buffer<T>(dev, n), out(n);
    comm.permute(in.data(), out.data(), n, dt, ring);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(as_double(out[i]), value(members[(r + k - 1) % k], i)) << "permute ring";
    comm.permute(in.data(), out.data(), n, dt, {{0, k - 1}});
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(as_double(out[i]), r == k - 1 ? value(members[0], i) : 0.0) << "permute pair";
  }
  // broadcast from the last member.
  {
    std::vector<T> buf = buffer<T>(dev, n);
    comm.broadcast(buf.data(), n, dt, k - 1);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(as_double(buf[i]), value(members[k - 1], i)) << "broadcast";
  }
  comm.barrier();

  // Counters against the ring formulas (within 1%).
  const double S = n * es, kk = k;
  const auto& c = comm.counters();
  auto expect_bytes = [&](Collective col, double want) {
    EXPECT_TRUE(near(c.bytes_of(col), want, 0.01)) << collective_name(col) << " counted " << c.bytes_of(col)
                                                   << " B, formula " << want << " B";
  };
  expect_bytes(Collective::kAllReduce, 4 * 2 * S * (kk - 1) / kk);  // 3 ops + in-place
  expect_bytes(Collective::kAllGather, S * (kk - 1));
  expect_bytes(Collective::kReduceScatter, (kk * S) * (kk - 1) / kk);
  expect_bytes(Collective::kAllToAll, (kk * S) * (kk - 1) / kk);
  expect_bytes(Collective::kPermute, (k > 1 ? S : 0.0) + (k > 1 && r == 0 ? S : 0.0));
  expect_bytes(Collective::kBroadcast, (k > 1 && r != k - 2) ? S : 0.0);
  EXPECT_EQ(c.calls_of(Collective::kAllReduce), 4);
  EXPECT_EQ(c.calls_of(Collective::kPermute), 2);
}

TEST(MpiCollectives, WorldIsTheMpiBackend) {
  EXPECT_EQ(g_world->backend(), g_world->size() > 1 || launched_under_mpi() ? "mpi" : "single");
  EXPECT_GE(g_world->rank(), 0);
  EXPECT_LT(g_world->rank(), g_world->size());
}

TEST(MpiCollectives, EveryCollectiveOnEveryAxisGroup) {
  for (const Mesh& mesh : meshes_for_world()) {
    SCOPED_TRACE("mesh " + mesh.to_string());
    MeshGroups groups(mesh, g_world);
    for (const auto& axes : axis_sets(mesh)) {
      Communicator& comm = groups.over(axes);
      std::vector<int64_t> members = mesh.group(axes);
      ASSERT_EQ(comm.size(), int(members.size()));  // same on every rank
      EXPECT_EQ(comm.rank(), mesh.rank_in_group(axes, mesh.device_id()));
      std::string tag = join(axes);
      check_collectives_typed<float>(comm, members, CommDtype::kF32, tag.c_str());
      check_collectives_typed<double>(comm, members, CommDtype::kF64, tag.c_str());
      check_collectives_typed<int32_t>(comm, members, CommDtype::kI32, tag.c_str());
      check_collectives_typed<int64_t>(comm, members, CommDtype::kI64, tag.c_str());
      check_collectives_typed<bfloat16>(comm, members, CommDtype::kBF16, tag.c_str());
    }
  }
}

TEST(MpiCollectives, Bf16AllReduceAccumulatesInF32) {
  // sharding.md C0.3: rank 0 holds 256, the others 1. Summing in bf16 (8-bit
  // mantissa, spacing 2 at 256) would drop every 1; f32 accumulation keeps
  // them and rounds once at the end.
  const int k = g_world->size();
  bfloat16 mine(g_world->rank() == 0 ? 256.f : 1.f), sum, rs_out;
  g_world->all_reduce(&mine, &sum, 1, CommDtype::kBF16);
  EXPECT_EQ(sum.bits, bfloat16(256.f + float(k - 1)).bits) << float(sum);
  if (k >= 3) {
    EXPECT_NE(float(sum), 256.f);
  }
  std::vector<bfloat16> in(k, mine);
  g_world->reduce_scatter(in.data(), &rs_out, 1, CommDtype::kBF16);
  EXPECT_EQ(rs_out.bits, sum.bits);
}

TEST(MpiCollectives, AllReduceEqualsReduceScatterThenAllGather) {
  // sharding.md C0.2, on the whole world, with integer-valued floats so the
  // result is exact whatever the reduction order.
  const int k = g_world->size();
  const size_t n = 1024 * size_t(k);
  std::vector<float> in(n), ar(n), rs(n / k), ag(n);
  for (size_t i = 0; i < n; ++i) in[i] = float((g_world->rank() * 131 + int(i) * 17) % 97);
  g_world->reset_counters();
  g_world->all_reduce(in.data(), ar.data(), n, CommDtype::kF32);
  const double ar_bytes = g_world->counters().total_bytes();
  g_world->reset_counters();
  g_world->reduce_scatter(in.data(), rs.data(), n / k, CommDtype::kF32);
  g_world->all_gather(rs.data(), ag.data(), n / k, CommDtype::kF32);
  EXPECT_EQ(ar, ag);
  EXPECT_TRUE(near(g_world->counters().total_bytes(), ar_bytes, 1e-12));
}

// The data axis's float32 gradient sum: every member gets the bits of
// sum_pairwise over the members' buffers in rank order (what one process
// adding the same blocks as microbatches gets), at a ring all-reduce's bytes
// rather than an all-gather's (k-1) * S. Sizes cover one element, a size
// that is not a multiple of k, and several pieces of k * 65536 elements.
TEST(MpiCollectives, AllReducePairwiseIsTheMicrobatchOrderAtRingBytes) {
  const int k = g_world->size(), r = g_world->rank();
  auto value = [](int member, size_t i) {  // not integers: the order shows in the bits
    return float(std::sin(double(member) * 1.7 + double(i) * 0.013) * 1e3) / 7.0f;
  };
  for (size_t n : {size_t(1), size_t(1000003), size_t(3) * 65536 * size_t(k) + 5}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = value(r, i);
    g_world->reset_counters();
    g_world->all_reduce_pairwise(buf.data(), n);
    using Block = std::vector<float>;
    const Block want = sum_pairwise<Block>(
        k,
        [&](int64_t m) {
          Block b(n);
          for (size_t i = 0; i < n; ++i) b[i] = value(int(m), i);
          return b;
        },
        [](Block& a, const Block& b) {
          for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
        });
    ASSERT_EQ(buf.size(), want.size());
    EXPECT_EQ(std::memcmp(buf.data(), want.data(), n * sizeof(float)), 0);
    // Bytes: 2 * S * (k-1)/k over the padded pieces (a ring all-reduce's;
    // k = 2 is one all_reduce, unpadded).
    double padded = k == 2 ? double(n) : 0.0;
    for (size_t off = 0; k > 2 && off < n; off += size_t(k) * 65536) {
      const size_t len = std::min(size_t(k) * 65536, n - off);
      padded += double((len + size_t(k) - 1) / size_t(k) * size_t(k));
    }
    const double want_bytes = k > 1 ? 2.0 * padded * 4 * (k - 1) / k : 0.0;
    EXPECT_TRUE(near(g_world->counters().total_bytes(), want_bytes, 1e-12))
        << g_world->counters().total_bytes() << " vs " << want_bytes;
    if (k > 2 && n > 1000) {  // a ring's bytes, not an all-gather's (k-1) * S
      EXPECT_LT(g_world->counters().total_bytes(), 0.75 * double(n) * 4 * (k - 1));
    }
  }
}

TEST(MpiCollectives, ReshardEveryPairOfLayouts) {
  // sharding.md T1.7 / T3.12: every (src, dst) pair gives the dst shard of the
  // unsharded array; bytes sent equal the plan's formula bytes (within 1%).
  for (const Mesh& mesh : meshes_for_world()) {
    SCOPED_TRACE("mesh " + mesh.to_string());
    MeshGroups groups(mesh, g_world);
    for (const NamedShape& shape : {NamedShape{{"b", 16}, {"e", 8}}, NamedShape{{"b", 8}, {"l", 2}, {"e", 8}}}) {
      int64_t total = 1;
      for (const auto& dim : shape) total *= dim.second;
      std::vector<float> global(total);
      std::iota(global.begin(), global.end(), 0.f);
      std::vector<PartitionSpec> specs;
      const std::vector<std::vector<std::string>> options{{}, {"data"}, {"model"}, {"data", "model"}, {"model", "data"}};
      const size_t last = shape.size() - 1;
      for (const auto& a : options)
        for (const auto& b : options) {
          PartitionSpec p = PartitionSpec::replicated(shape.size());
          p.dims[0] = a, p.dims[last] = b;
          try {
            validate_partition_spec(mesh.desc(), shape, p);
            specs.push_back(p);
          } catch (const std::invalid_argument&) {
          }
        }
      for (const auto& src : specs)
        for (const auto& dst : specs) {
          ReshardPlan plan = plan_reshard(mesh.desc(), shape, src, dst, sizeof(float));
          auto ls = local_shape(mesh.desc(), shape, src), ld = local_shape(mesh.desc(), shape, dst);
          int64_t ns = 1, nd = 1;
          for (auto v : ls) ns *= v;
          for (auto v : ld) nd *= v;
          std::vector<float> in(ns), out(nd, -1.f), want(nd);
          extract_shard(mesh.desc(), shape, src, mesh.device_id(), global.data(), in.data(), sizeof(float));
          extract_shard(mesh.desc(), shape, dst, mesh.device_id(), global.data(), want.data(), sizeof(float));
          groups.reset_counters();
          execute_reshard(plan, groups, in.data(), out.data(), CommDtype::kF32);
          EXPECT_EQ(out, want) << plan.to_string();
          const CommCounters c = groups.total_counters();
          EXPECT_TRUE(near(c.total_bytes(), plan.total_bytes(), 0.01))
              << plan.to_string() << " counted " << c.total_bytes();
          EXPECT_EQ(c.calls_of(Collective::kAllGather), plan.count(ReshardKind::kAllGather));
          EXPECT_EQ(c.calls_of(Collective::kAllToAll), plan.count(ReshardKind::kAllToAll));
          EXPECT_EQ(c.calls_of(Collective::kPermute), plan.count(ReshardKind::kPermute));
        }
    }
  }
}

TEST(MpiCollectives, ZeroThreeParameterBytes) {
  // sharding.md T4.4: under standard rules (1,2) a weight ('embed','mlp') is
  // split over data x model, so each process holds total/N bytes; gathering it
  // over 'data' before use (ZeRO-3) moves S_loc*(|data|-1) bytes.
  for (const Mesh& mesh : meshes_for_world()) {
    if (mesh.ndim() != 2) continue;  // a 'replica' axis would replicate the weight
    NamedShape w{{"embed", 64}, {"mlp", 32}};
    PartitionSpec spec = logical_to_mesh_axes({"embed", "mlp"}, standard_logical_axis_rules(1, 2));
    auto loc = local_shape(mesh.desc(), w, spec);
    EXPECT_EQ(loc[0] * loc[1] * mesh.num_devices(), 64 * 32);
    PartitionSpec gathered = logical_to_mesh_axes({"embed", "mlp"}, standard_logical_axis_rules(1, 1));
    ReshardPlan plan = plan_reshard(mesh.desc(), w, spec, gathered, 4);
    const double d = double(mesh.axis_size("data"));
    EXPECT_DOUBLE_EQ(plan.total_bytes(), loc[0] * loc[1] * 4.0 * (d - 1));
    EXPECT_EQ(plan.count(ReshardKind::kAllGather), 1);
  }
}

TEST(MpiCollectives, MisconfiguredGroupsThrowOnEveryRank) {
  // The check is local, so every rank throws the same error without talking.
  const int n = g_world->size();
  std::string err;
  try {
    MeshGroups bad(Mesh({n + 1, 1}), g_world);
  } catch (const std::invalid_argument& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("needs " + std::to_string(n + 1) + " devices but " + std::to_string(n) + " processes are running"),
            std::string::npos)
      << err;
  // ... and the group is still usable afterwards.
  int32_t one = 1, sum = 0;
  g_world->all_reduce(&one, &sum, 1, CommDtype::kI32);
  EXPECT_EQ(sum, n);
}

}  // namespace
}  // namespace t5x

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  t5x::g_world = t5x::init_communicator(t5x::CommBackend::kAny);
  const int rc = t5x::testing_mpi::run_all_tests_on_every_rank(*t5x::g_world);
  t5x::g_world.reset();
  return rc;
}
