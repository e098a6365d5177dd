// Per-primitive wall-clock profile of eager ops (forward) and their vjps
// (backward), for finding what dominates a training step.
//
// Off unless the environment variable T5X_OP_PROFILE is set (non-empty, not
// "0") when the process starts, or op_profile_enable(true) is called. Times
// are exclusive: an op's forward that runs other ops (einsum calling
// transpose / cast) is charged only its own part. Main-thread only (ops
// called from several threads at once are charged to whichever finishes).
#pragma once
#include <string>

namespace t5x {

void op_profile_enable(bool on);
bool op_profile_enabled();
void op_profile_reset();
// Adds `seconds` under `key` (inclusive, not subtracted from the enclosing
// op): e.g. einsum's GEMMs by shape.
void op_profile_add(const std::string& key, double seconds);
// One line per (primitive, pass), most expensive first:
// "<ms total>  <calls>  <name>/<fwd|vjp>".
std::string op_profile_report();

}  // namespace t5x
