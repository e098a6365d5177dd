// Internal helpers shared by the op families (not part of the public API).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/array.h"

namespace t5x {
class ShardedLowering;  // ops/lowering.h
}

namespace t5x::detail {

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

// Throws "[op] sharded inputs not supported yet (...)" unless every valid array
// is single-device or fully replicated (apply() calls it when no sharded
// lowering is installed).
void check_local(const char* op, const std::vector<Array>& xs);
// apply_composite (ops/primitive.h) of a one-output op.
Array composite1(const char* name, const std::vector<Array>& inputs, std::function<Array(const std::vector<Array>&)> expand,
                 std::function<Array(const ShardedLowering&, const std::vector<Array>&)> lower);
// Output of an op over `inputs`: uninitialised (or zeroed), on the same mesh
// (replicated) as the first input that has one.
Array make_output(const Shape& shape, DType dtype, const std::vector<Array>& inputs, bool zero = false);

// Throws "[op] expected a floating dtype for x, got int32".
void check_floating(const char* op, const Array& x, const char* what = "x");
void check_same_dtype(const char* op, const Array& a, const Array& b, const char* an = "x", const char* bn = "y");
// Throws "[op] no dim 'd' in x[...]"; returns its index.
int require_dim(const char* op, const Array& x, const std::string& dim, const char* what = "x");
// "float32[batch=2, embed=3]"
std::string describe(const Array& x);

// Union of named shapes: dims of a in order, then dims of b not in a.
// Throws "[op] dim 'embed' has size 4 in x[...] but 3 in y[...]".
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides of `in`'s buffer laid over the dims of `out` (0 where in lacks a dim).
std::vector<int64_t> strides_over(const Shape& in, const Shape& out);

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

// Sums g over the dims absent from `target` and orders it like target
// (the vjp of a broadcast by name).
Array unbroadcast(const Array& g, const Shape& target);

}  // namespace t5x::detail
