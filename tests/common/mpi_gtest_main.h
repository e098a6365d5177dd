// The main() body shared by the MPI gtest binaries (run under mpirun by ctest).
// Every rank runs every test; rank 0 prints gtest's full report, the other
// ranks print only their failed assertions, tagged with the rank. The exit
// status is agreed over the world, so one failing rank fails the whole run
// (and ctest sees it whichever rank's status mpirun reports).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>

#include "mesh/communicator.h"

namespace t5x::testing_mpi {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

// Call after ::testing::InitGoogleTest. Returns 0 when every rank passed, else 1.
inline int run_all_tests_on_every_rank(Communicator& world) {
  if (world.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(world.rank()));
  }
  const int rc = RUN_ALL_TESTS();
  int32_t mine = rc, any = 0;
  world.all_reduce(&mine, &any, 1, CommDtype::kI32, ReduceOp::kMax);
  if (any && !rc) std::fprintf(stderr, "rank %d: passed here, but another rank failed\n", world.rank());
  return any ? 1 : 0;
}

// The whole main() of an MPI gtest binary: parses gtest flags, sets `world`
// to the world communicator (MPI under mpiexec), runs every test on every
// rank, then drops the process-wide spmd context (`reset`, if any) before
// MPI finalizes.
template <typename Reset>
int main_on_every_rank(int argc, char** argv, std::shared_ptr<Communicator>& world, Reset&& reset) {
  ::testing::InitGoogleTest(&argc, argv);
  world = init_communicator(CommBackend::kAny);
  const int rc = run_all_tests_on_every_rank(*world);
  reset();
  return rc;
}

}  // namespace t5x::testing_mpi
