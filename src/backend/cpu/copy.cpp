// Copies of kernels::cpu (backend/kernels.h): strided gathers (transposes,
// broadcasts, block reads) and block writes, by element size.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/loops.h"
#include "backend/kernels.h"

namespace t5x::kernels::cpu {
using t5x::cpu::kParallelThreshold;
using t5x::cpu::strided_loop;

namespace {

template <typename F>
void dispatch_size(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

// Copy where the input's contiguous dim p is not the output's last dim:
// 16 x 16 tiles over (p, last) keep both reads and writes cache friendly.
template <typename T>
void tiled_copy(const T* src, T* dst, const std::vector<int64_t>& sizes, const std::vector<int64_t>& in_st, int p) {
  const int r = int(sizes.size()), last = r - 1;
  std::vector<int64_t> out_st(static_cast<size_t>(r));
  int64_t acc = 1;
  for (int d = r - 1; d >= 0; --d) { out_st[size_t(d)] = acc; acc *= sizes[size_t(d)]; }
  int64_t outer = 1;
  for (int d = 0; d < r; ++d)
    if (d != p && d != last) outer *= sizes[size_t(d)];
  constexpr int64_t kT = 16;
  const int64_t np = sizes[size_t(p)], nl = sizes[size_t(last)];
  const int64_t tp = (np + kT - 1) / kT, tl = (nl + kT - 1) / kT;
  const int64_t sl = in_st[size_t(last)], dp = out_st[size_t(p)];
#pragma omp parallel for schedule(static) if (acc > kParallelThreshold)
  for (int64_t task = 0; task < outer * tp * tl; ++task) {
    int64_t o = task / (tp * tl), rem = task % (tp * tl);
    const int64_t i0 = (rem / tl) * kT, j0 = (rem % tl) * kT;
    int64_t sb = 0, db = 0;
    for (int d = r - 1; d >= 0; --d) {
      if (d == p || d == last) continue;
      int64_t i = o % sizes[size_t(d)];
      o /= sizes[size_t(d)];
      sb += i * in_st[size_t(d)];
      db += i * out_st[size_t(d)];
    }
    const int64_t i1 = std::min(np, i0 + kT), j1 = std::min(nl, j0 + kT);
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = j0; j < j1; ++j) dst[db + i * dp + j] = src[sb + i + j * sl];
  }
}

}  // namespace

void copy(size_t elem_bytes, const Strided<1>& s, const void* src_v, void* dst_v, bool tiled) {
  dispatch_size(elem_bytes, [&](auto t) {
    using T = decltype(t);
    const T* src = static_cast<const T*>(src_v);
    T* dst = static_cast<T*>(dst_v);
    const auto& st = s.strides[0];
    const int r = int(s.sizes.size());
    int p = -1;
    for (int d = 0; d < r; ++d)
      if (st[size_t(d)] == 1 && s.sizes[size_t(d)] > 1) p = d;
    if (tiled && r >= 2 && p >= 0 && p != r - 1 && st[size_t(r - 1)] != 0 && s.sizes[size_t(r - 1)] >= 4 &&
        s.sizes[size_t(p)] >= 4) {
      tiled_copy<T>(src, dst, s.sizes, st, p);
      return;
    }
    strided_loop<1>(s.sizes, s.strides, [&](int64_t o, std::array<int64_t, 1> in, int64_t len,
                                               std::array<int64_t, 1> sd) {
      if (sd[0] == 1) std::memcpy(dst + o, src + in[0], size_t(len) * sizeof(T));
      else for (int64_t j = 0; j < len; ++j) dst[o + j] = src[in[0] + j * sd[0]];
    });
  });
}

void copy_into(size_t elem_bytes, const Strided<1>& s, const void* src_v, void* dst_v) {
  dispatch_size(elem_bytes, [&](auto t) {
    using T = decltype(t);
    const T* src = static_cast<const T*>(src_v);
    T* d = static_cast<T*>(dst_v);
    strided_loop<1>(s.sizes, s.strides, [&](int64_t o, std::array<int64_t, 1> in, int64_t len,
                                               std::array<int64_t, 1> ss) {
      if (ss[0] == 1) std::memcpy(d + in[0], src + o, size_t(len) * sizeof(T));
      else for (int64_t j = 0; j < len; ++j) d[in[0] + j * ss[0]] = src[o + j];
    });
  });
}

}  // namespace t5x::kernels::cpu
