// Shared pieces of the CPU backend's generic (all-dtype) loops: compute
// types, the OpenMP threshold and the strided row iterator.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype.h"

namespace t5x::cpu {

// Compute type: 16-bit floats compute in f32; everything else in itself.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>, float, T>;

template <typename T> inline compute_t<T> ld(T v) { return compute_t<T>(v); }
template <typename T> inline T st(compute_t<T> v) {
  if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) return T(v);
  else return v;
}

// Elements above which kernels use OpenMP threads.
constexpr int64_t kParallelThreshold = 1 << 15;

// Iterates a row-major output of `sizes` with N strided inputs. Calls
// f(out_offset, in_offsets, len, inner_strides) once per (collapsed) row, in
// parallel when the total is large. Output element j of the row is
// out_offset + j; input k's is in_offsets[k] + j * inner_strides[k].
template <size_t N, typename F>
void strided_loop(const std::vector<int64_t>& sizes_in, const std::array<std::vector<int64_t>, N>& strides_in, F&& f) {
  // Collapse adjacent dims that are contiguous for every input.
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> st;
  for (size_t d = 0; d < sizes_in.size(); ++d) {
    if (sizes_in[d] == 1) continue;
    bool merge = !sizes.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = st[k].back() == strides_in[k][d] * sizes_in[d];
    if (merge) {
      sizes.back() *= sizes_in[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides_in[k][d];
    } else {
      sizes.push_back(sizes_in[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides_in[k][d]);
    }
  }
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  if (total == 0) return;
  if (sizes.empty()) {
    std::array<int64_t, N> off{}, inner{};
    f(int64_t(0), off, int64_t(1), inner);
    return;
  }
  const int r = int(sizes.size());
  const int64_t len = sizes[size_t(r - 1)];
  const int64_t rows = total / len;
  // Long rows are cut into chunks so that one-row problems also use threads.
  const int64_t chunk = len > 16384 ? 16384 : len;
  const int64_t nchunks = (len + chunk - 1) / chunk;
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = st[k][size_t(r - 1)];
#pragma omp parallel for schedule(static) if (total > kParallelThreshold && rows * nchunks > 1)
  for (int64_t task = 0; task < rows * nchunks; ++task) {
    const int64_t row = task / nchunks, c = task % nchunks;
    std::array<int64_t, N> off{};
    int64_t rem = row;
    for (int d = r - 2; d >= 0; --d) {
      int64_t i = rem % sizes[size_t(d)];
      rem /= sizes[size_t(d)];
      for (size_t k = 0; k < N; ++k) off[k] += i * st[k][size_t(d)];
    }
    for (size_t k = 0; k < N; ++k) off[k] += c * chunk * inner[k];
    f(row * len + c * chunk, off, std::min(chunk, len - c * chunk), inner);
  }
}

}  // namespace t5x::cpu
