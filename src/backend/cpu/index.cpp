// Gathers and scatters of kernels::cpu (backend/kernels.h): take and its
// gradient, top_k rows, one_hot.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/loops.h"
#include "backend/kernels.h"

namespace t5x::kernels::cpu {
using t5x::cpu::kParallelThreshold;

void take(size_t elem_bytes, const Split3& s, const int64_t* ids, int64_t ni, const void* x, void* out) {
  const char* src = static_cast<const char*>(x);
  char* dst = static_cast<char*>(out);
  const size_t row = size_t(s.post) * elem_bytes;
  const int64_t size = s.pre * ni * s.post;
#pragma omp parallel for collapse(2) schedule(static) if (size > kParallelThreshold)
  for (int64_t p = 0; p < s.pre; ++p)
    for (int64_t i = 0; i < ni; ++i)
      std::memcpy(dst + size_t(p * ni + i) * row, src + size_t(p * s.n + ids[size_t(i)]) * row, row);
}

void take_grad_f32(const Split3& s, const int64_t* ids, int64_t ni, const float* g, float* gx) {
  // The embedding gradient ([vocab, embed] for a few hundred tokens) is
  // mostly zeros: fill and scatter on every thread.
  const int64_t total = s.pre * s.n * s.post;
#pragma omp parallel for schedule(static) if (total > kParallelThreshold)
  for (int64_t c = 0; c < total; c += 1 << 16)
    std::memset(gx + c, 0, size_t(std::min<int64_t>(1 << 16, total - c)) * sizeof(float));
  // Parallel over pre and 64-wide column blocks; ids are walked in order, so
  // repeats add up deterministically (the same sums on any thread count).
  const int64_t blk = 64, nblk = (s.post + blk - 1) / blk;
  const int64_t gsize = s.pre * ni * s.post;
#pragma omp parallel for collapse(2) schedule(static) if (gsize > kParallelThreshold)
  for (int64_t p = 0; p < s.pre; ++p)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t q0 = b * blk, q1 = std::min(s.post, q0 + blk);
      for (int64_t i = 0; i < ni; ++i) {
        float* d = gx + (p * s.n + ids[size_t(i)]) * s.post;
        const float* a = g + (p * ni + i) * s.post;
        for (int64_t q = q0; q < q1; ++q) d[q] += a[q];
      }
    }
}

void take_grad_add_f32(const Split3& s, const int64_t* ids, int64_t ni, const float* g, float* gx) {
  // The positions of each distinct id, in order: one group per row of gx.
  std::vector<int64_t> order(size_t(ni), 0);
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < ni; ++i)
    if (i == 0 || ids[order[size_t(i)]] != ids[order[size_t(i - 1)]]) starts.push_back(i);
  starts.push_back(ni);
  const int64_t groups = int64_t(starts.size()) - 1;
  constexpr int64_t blk = 64;
  const int64_t nblk = (s.post + blk - 1) / blk;
  const int64_t gsize = s.pre * ni * s.post;
#pragma omp parallel for collapse(2) schedule(static) if (gsize > kParallelThreshold)
  for (int64_t p = 0; p < s.pre; ++p)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t q0 = b * blk, q1 = std::min(s.post, q0 + blk);
      float sum[blk];
      for (int64_t r = 0; r < groups; ++r) {
        std::fill(sum, sum + (q1 - q0), 0.0f);
        for (int64_t t = starts[size_t(r)]; t < starts[size_t(r + 1)]; ++t) {
          const float* a = g + (p * ni + order[size_t(t)]) * s.post;
          for (int64_t q = q0; q < q1; ++q) sum[q - q0] += a[q];
        }
        float* d = gx + (p * s.n + ids[order[size_t(starts[size_t(r)])]]) * s.post;
        for (int64_t q = q0; q < q1; ++q) d[q] += sum[q - q0];
      }
    }
}

void top_k_rows(const float* x, int64_t rows, int64_t n, int64_t k, float* values, int32_t* indices) {
#pragma omp parallel for schedule(static) if (rows * n > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    const float* row = x + r * n;
    std::partial_sort(perm.begin(), perm.begin() + k, perm.end(), [&](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int64_t j = 0; j < k; ++j) {
      indices[r * k + j] = perm[size_t(j)];
      values[r * k + j] = row[perm[size_t(j)]];
    }
  }
}

void one_hot(DType dtype, const int64_t* ids, int64_t n, int64_t depth, void* out) {
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(out);
    T one;
    if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) one = T(1.0f);
    else one = T(1);
    for (int64_t i = 0; i < n; ++i)
      if (ids[i] >= 0 && ids[i] < depth) p[i * depth + ids[i]] = one;
  });
}

}  // namespace t5x::kernels::cpu
