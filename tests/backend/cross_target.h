// Runs a kernel on every SIMD target this CPU supports and checks that all
// targets give the same bits (backend/cpu/simd.h: determinism across
// machines). A "run" returns every output it wrote, as floats (bf16 widens
// exactly). Bits must match, except that a NaN may carry another sign or
// payload (std::fma on targets without FMA makes other NaNs than the
// instruction; NaN payloads are not a contract, as in JAX).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/simd.h"

namespace t5x::cpu::testing {

using Bytes = std::vector<float>;

template <typename T>
void append(Bytes& out, const std::vector<T>& v) {
  for (const T& x : v) out.push_back(float(x));
}

// Index of the first differing value (or -1), for the failure message.
inline long first_diff(const Bytes& a, const Bytes& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return long(i);
  }
  return a.size() == b.size() ? -1 : long(std::min(a.size(), b.size()));
}

// run() on each target, best first; every result must equal the first.
// Returns the number of targets run.
inline size_t expect_same_on_every_target(const std::string& what, const std::function<Bytes()>& run) {
  const std::vector<int64_t> targets = simd_targets();
  EXPECT_FALSE(targets.empty());
  Bytes ref;
  std::string ref_name;
  for (int64_t t : targets) {
    Bytes got;
    {
      ScopedSimdTarget scope(t);
      EXPECT_EQ(simd_target(), simd_target_name(t));
      got = run();
    }
    if (ref_name.empty()) {
      ref = std::move(got);
      ref_name = simd_target_name(t);
      continue;
    }
    const long at = first_diff(ref, got);
    EXPECT_EQ(at, -1) << what << ": " << simd_target_name(t) << " differs from " << ref_name << " at value " << at
                      << " of " << ref.size();
  }
  return targets.size();
}

}  // namespace t5x::cpu::testing
