// The message of the CheckpointError that f() throws, or "<no error>": for
// tests that assert exact messages.
#pragma once
#include <functional>
#include <string>

#include "t5x/checkpoints/host_tensor.h"

namespace t5x::testing_ckpt {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace t5x::testing_ckpt
