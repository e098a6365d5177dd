// Fault injection for the crash tests (tests/t5x/checkpoints/kill_resume_test.cpp):
// the environment variable
//
//   T5X_FAULT_INJECT=<point>:<step>[@<rank>][,<point>:<step>[@<rank>]...]
//
// makes the process SIGKILL itself the first time it reaches <point> for
// checkpoint / training step <step> (on every process, or on MPI rank <rank>
// only: OMPI_COMM_WORLD_RANK, PMI_RANK, else 0). A SIGKILL, not an exception:
// nothing is flushed or cleaned up, as with `kill -9` or the OOM killer.
// Points:
//   train_step          step <step> computed its gradients, before the update
//   save_chunks         the first array of checkpoint <step> is written (tmp dir)
//   save_before_rename  the tmp dir is complete (msgpack, manifest), not renamed
//   save_after_rename   checkpoint_<step> renamed into place, before retention
//                       and the closing barrier
//   eval                evaluation at <step>: teacher-forced metrics computed,
//                       nothing written yet, inference evaluation not run
// Unset (the normal case) costs one getenv per process. A malformed value or an
// unknown point throws std::invalid_argument naming T5X_FAULT_INJECT.
#pragma once
#include <cstdint>
#include <string_view>

namespace t5x {

void fault_point(std::string_view point, int64_t step);

// Parses T5X_FAULT_INJECT now, so that a malformed value fails at start-up
// (the commands call it first), not at the first fault point reached.
void check_fault_injection();

}  // namespace t5x
