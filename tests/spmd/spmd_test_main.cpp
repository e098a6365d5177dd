// main() of the distributed spmd tests: MPI world, one context per mesh,
// rank 0 prints the full report, the exit code is non-zero if any rank failed.
#include <cstdio>

#include "../common/mpi_gtest_main.h"
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

int main(int argc, char** argv) {
  using t5x::testing_spmd::g_world;
  ::testing::InitGoogleTest(&argc, argv);
  g_world = t5x::init_communicator(t5x::CommBackend::kAny);
  const int rc = t5x::testing_mpi::run_all_tests_on_every_rank(*g_world);
  t5x::spmd::set_context(nullptr);
  return rc;
}
