// main() of the distributed spmd tests: MPI world, one context per mesh,
// rank 0 prints the full report, the exit code is non-zero if any rank failed.
#include <cstdio>

#include "spmd_test_util.h"

namespace t5x::testing_spmd {

std::shared_ptr<Communicator> g_world;

const std::vector<std::shared_ptr<spmd::Context>>& contexts() {
  static std::vector<std::shared_ptr<spmd::Context>> ctxs = [] {
    std::vector<std::shared_ptr<spmd::Context>> out;
    const int n = g_world->size();
    for (auto [d, m] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 2}})
      if (d * m == n) out.push_back(std::make_shared<spmd::Context>(Mesh({d, m}, {"data", "model"}, g_world->rank()), g_world));
    return out;
  }();
  return ctxs;
}

std::string mesh_name(const spmd::Context& c) { return c.mesh().to_string(); }

}  // namespace t5x::testing_spmd

namespace {
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  using t5x::testing_spmd::g_world;
  ::testing::InitGoogleTest(&argc, argv);
  g_world = t5x::init_communicator(t5x::CommBackend::kAny);
  if (g_world->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(g_world->rank()));
  }
  int rc = RUN_ALL_TESTS();
  int32_t mine = rc, any = 0;
  g_world->all_reduce(&mine, &any, 1, t5x::CommDtype::kI32, t5x::ReduceOp::kMax);
  if (any && !rc) std::fprintf(stderr, "rank %d: passed here, but another rank failed\n", g_world->rank());
  t5x::spmd::set_context(nullptr);
  return any ? 1 : 0;
}
