// The packed GEMM's loops (packed_gemm.h): one source, compiled per SIMD
// target (Highway), chosen at run time.
#include "backend/cpu/packed_gemm.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/packed_gemm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

// Register tile: kMr rows x kNv vectors of C (12 accumulators: AVX2 and SSE4
// have 16 vector registers; the other 4 hold B's two vectors and A's value).
inline constexpr int64_t kMr = 6;
inline constexpr int64_t kNv = 2;
inline constexpr int64_t kLanes = int64_t(hn::MaxLanes(DF()));
inline constexpr int64_t kNr = kNv * kLanes;
// Cache blocks, measured on T5.1.1-small's training products (2 threads,
// AVX2, docs/performance.md): an A block (kMc x kc floats, 48 KiB) and a B
// block (kc x kNc floats, 512 KiB) both stay in a 1 MiB L2; larger blocks
// (144 x 3072, BLIS's usual L2 / L3 split) ran 5-10% slower here.
inline constexpr int64_t kMc = 8 * kMr;
inline constexpr int64_t kNc = kPackedGemmNc;
static_assert(kNc % 32 == 0, "kNc must hold whole panels on every target");

// A growable 64-byte aligned float buffer.
struct AlignedFloats {
  hwy::AlignedFreeUniquePtr<float[]> p;
  size_t size = 0;
  void reserve(size_t n) {
    if (n <= size) return;
    p = hwy::AllocateAligned<float>(n);
    size = n;
  }
  float* data() { return p.get(); }
};

// Element (r, c) of a strided operand: p[r * rs + c * cs], widened to f32.
template <typename T>
struct Strided {
  const T* p;
  int64_t rs, cs;
};

// A stored value as the product takes it: f32 and bf16 exactly, F32AsBf16
// rounded to bf16 (the rule of bfloat16::from_float; RoundBf16 in vectors).
HWY_INLINE float Widen(float x) { return x; }
HWY_INLINE float Widen(bfloat16 x) { return float(x); }
HWY_INLINE float Widen(F32AsBf16 x) { return float(bfloat16(x.value)); }
template <class D>
HWY_INLINE hn::Vec<D> LoadF(D d, const F32AsBf16* p) {
  return RoundBf16(d, hn::LoadU(d, &p->value));
}

// Widening copy of n contiguous values.
template <typename T>
HWY_INLINE void CopyWiden(const T* src, float* dst, int64_t n) {
  const DF d;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) hn::StoreU(LoadF(d, src + i), d, dst + i);
  for (; i < n; ++i) dst[i] = Widen(src[i]);
}

// op(A)'s block [mc, kc] into panels of kMr rows, zero rows past mc. When A's
// rows run along k (cs == 1) each panel is kMr rows of kc values (row
// layout, a plain copy); otherwise (A stored transposed) kc groups of kMr.
template <typename T>
void PackA(Strided<T> a, int64_t mc, int64_t kc, float* dst) {
  const bool rows = a.cs == 1;
  for (int64_t i0 = 0; i0 < mc; i0 += kMr, dst += kMr * kc) {
    const int64_t mr = std::min(kMr, mc - i0);
    if (rows) {
      for (int64_t r = 0; r < kMr; ++r) {
        if (r < mr) CopyWiden(a.p + (i0 + r) * a.rs, dst + r * kc, kc);
        else std::fill(dst + r * kc, dst + (r + 1) * kc, 0.0f);
      }
    } else if (a.rs == 1 && kLanes >= kMr && i0 + kLanes <= mc) {
      // A stored transposed, a panel with a full vector of its block's rows
      // from i0 (not the block's last): one widening load per k, stored
      // whole; the lanes past kMr land in the next group, which the next k
      // overwrites (the panel's last k spills into the next panel's start,
      // packed after it).
      const DF d;
      for (int64_t p = 0; p < kc; ++p) hn::StoreU(LoadF(d, a.p + p * a.cs + i0), d, dst + p * kMr);
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = a.p + p * a.cs + i0 * a.rs;
        float* out = dst + p * kMr;
        for (int64_t r = 0; r < kMr; ++r) out[r] = r < mr ? Widen(src[r * a.rs]) : 0.0f;
      }
    }
  }
}

#if HWY_TARGET == HWY_AVX2
// dst[q * kNr + i] = src[i * ld + q] for i, q < 8 (8 rows of 8 contiguous
// values, widened): the B-transposed packing's inner step, as in-register
// shuffles (per-128-bit interleaves, then 128-bit halves).
template <typename T>
HWY_INLINE void Transpose8x8(const T* src, int64_t ld, float* dst) {
  const DF d;
  const hn::Repartition<double, DF> dd;
  VF r[8];
  for (int i = 0; i < 8; ++i) r[i] = LoadF(d, src + i * ld);
  VF t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = hn::InterleaveLower(d, r[i], r[i + 1]);  // r_i0 r_i+1,0 r_i1 r_i+1,1 | ...4,5
    t[i + 1] = hn::InterleaveUpper(d, r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4)
    for (int s = 0; s < 2; ++s) {
      const auto a = hn::BitCast(dd, t[h + s]), b = hn::BitCast(dd, t[h + 2 + s]);
      u[h + 2 * s] = hn::BitCast(d, hn::InterleaveLower(dd, a, b));
      u[h + 2 * s + 1] = hn::BitCast(d, hn::InterleaveUpper(dd, a, b));
    }
  // u[0..3]: columns 0..3 (low halves) and 4..7 (high halves) of rows 0-3;
  // u[4..7] the same of rows 4-7.
  for (int q = 0; q < 4; ++q) {
    hn::StoreU(hn::ConcatLowerLower(d, u[4 + q], u[q]), d, dst + q * kNr);
    hn::StoreU(hn::ConcatUpperUpper(d, u[4 + q], u[q]), d, dst + (q + 4) * kNr);
  }
}
#endif

// op(B)'s block [kc, nc] into panels of kNr columns: kc rows of kNr values,
// zero columns past nc.
template <typename T>
void PackB(Strided<T> b, int64_t kc, int64_t nc, float* dst) {
  const DF d;
  if (b.cs == 1) {
    // Row by row across the panels (panel j0 starts at dst + j0 * kc): each
    // source row's nc values are read once, in order, a stream the hardware
    // prefetches. Panel by panel, every row's next line would lie a whole
    // row (4 KiB for an f32 [512, 1024] kernel) past the last: a new page
    // each time.
    const int64_t full = nc / kNr * kNr;
    for (int64_t p = 0; p < kc; ++p) {
      const T* src = b.p + p * b.rs;
      for (int64_t j0 = 0; j0 < full; j0 += kNr)
        for (int64_t v = 0; v < kNv; ++v)
          hn::StoreU(LoadF(d, src + j0 + v * kLanes), d, dst + j0 * kc + p * kNr + v * kLanes);
      if (full < nc) {
        float* out = dst + full * kc + p * kNr;
        for (int64_t j = 0; j < kNr; ++j) out[j] = full + j < nc ? Widen(src[full + j]) : 0.0f;
      }
    }
    return;
  }
  // B stored transposed ([n, k]): each column of a panel is a contiguous
  // source row.
  for (int64_t j0 = 0; j0 < nc; j0 += kNr, dst += kNr * kc) {
    const int64_t nr = std::min(kNr, nc - j0);
#if HWY_TARGET == HWY_AVX2
    if (nr == kNr) {
      int64_t p = 0;
      for (; p + 8 <= kc; p += 8)
        for (int64_t j = 0; j < kNr; j += 8) Transpose8x8(b.p + (j0 + j) * b.cs + p * b.rs, b.cs, dst + p * kNr + j);
      for (int64_t j = 0; j < kNr; ++j)
        for (int64_t q = p; q < kc; ++q) dst[q * kNr + j] = Widen(b.p[(j0 + j) * b.cs + q * b.rs]);
      continue;
    }
#endif
    for (int64_t j = 0; j < kNr; ++j) {
      float* out = dst + j;
      if (j < nr) {
        const T* src = b.p + (j0 + j) * b.cs;
        for (int64_t p = 0; p < kc; ++p) out[p * kNr] = Widen(src[p * b.rs]);
      } else {
        for (int64_t p = 0; p < kc; ++p) out[p * kNr] = 0.0f;
      }
    }
  }
}

// Where a tile's result goes. f32 C: c (row stride ldc). bf16 C (c16 set):
// the k blocks before the last sum in f32 at c (a scratch), and the last
// block rounds sum + beta16 * C once into c16 (row stride ld16).
struct TileOut {
  float* c;
  int64_t ldc;
  bfloat16* c16;
  int64_t ld16;
};

// The tile from the accumulators: the first k block writes alpha * acc
// (+ beta * C for an f32 C), later ones add alpha * acc; a bf16 C's last
// block stores round(sum + beta * C).
HWY_INLINE void WriteTile(const VF (&acc)[kMr][kNv], const TileOut& o, float alpha, float beta, bool first,
                          bool last) {
  const DF d;
  const VF va = hn::Set(d, alpha), vb = hn::Set(d, beta);
  const bool to16 = o.c16 != nullptr && last;
  for (int64_t r = 0; r < kMr; ++r)
    for (int64_t v = 0; v < kNv; ++v) {
      VF x = alpha == 1.0f ? acc[r][v] : hn::Mul(va, acc[r][v]);
      if (!first) x = hn::Add(hn::LoadU(d, o.c + r * o.ldc + v * kLanes), x);
      if (to16) {  // o.c is null here when k is one block
        bfloat16* cp16 = o.c16 + r * o.ld16 + v * kLanes;
        if (beta != 0.0f) x = hn::Add(x, hn::Mul(vb, LoadF(d, cp16)));
        StoreF(d, x, cp16);
        continue;
      }
      float* cp = o.c + r * o.ldc + v * kLanes;
      if (first && beta != 0.0f && o.c16 == nullptr) x = hn::Add(x, hn::Mul(vb, hn::LoadU(d, cp)));
      hn::StoreU(x, d, cp);
    }
}

// One register tile over a k block: ap is an A panel (row layout when
// kARows), bp a B panel; C's tile has mr x nr valid elements.
template <bool kARows>
HWY_NOINLINE void Tile(int64_t kc, const float* HWY_RESTRICT ap, const float* HWY_RESTRICT bp, const TileOut& o,
                       int64_t mr, int64_t nr, float alpha, float beta, bool first, bool last) {
  const DF d;
  VF acc[kMr][kNv];
  // C's tile is read or written only after the k loop: fetching its lines
  // now hides their L2 / L3 latency behind it (+5-6% on the step's
  // products at AVX2, every shape; docs/performance.md).
  if (o.c != nullptr && !(o.c16 != nullptr && first && last))  // f32 C, or a bf16 C's f32 sums
    for (int64_t r = 0; r < mr; ++r) {
      PrefetchLine<PrefetchTo::kL1>(o.c + r * o.ldc);
      PrefetchLine<PrefetchTo::kL1>(o.c + r * o.ldc + nr - 1);
    }
  if (o.c16 != nullptr && last)
    for (int64_t r = 0; r < mr; ++r) {
      PrefetchLine<PrefetchTo::kL1>(o.c16 + r * o.ld16);
      PrefetchLine<PrefetchTo::kL1>(o.c16 + r * o.ld16 + nr - 1);
    }
  for (int64_t r = 0; r < kMr; ++r)
    for (int64_t v = 0; v < kNv; ++v) acc[r][v] = hn::Zero(d);
  for (int64_t p = 0; p < kc; ++p) {
    const VF b0 = hn::LoadU(d, bp + p * kNr);
    const VF b1 = hn::LoadU(d, bp + p * kNr + kLanes);
    for (int64_t r = 0; r < kMr; ++r) {
      const VF av = hn::Set(d, kARows ? ap[r * kc + p] : ap[p * kMr + r]);
      acc[r][0] = Fma(d, av, b0, acc[r][0]);
      acc[r][1] = Fma(d, av, b1, acc[r][1]);
    }
  }
  if (mr == kMr && nr == kNr) return WriteTile(acc, o, alpha, beta, first, last);
  // Edge tile: the same arithmetic on a copy of C's valid part.
  HWY_ALIGN float buf[kMr * kNr] = {};
  HWY_ALIGN bfloat16 buf16[kMr * kNr] = {};
  const bool to16 = o.c16 != nullptr && last;
  const bool read32 = !first || (beta != 0.0f && o.c16 == nullptr);
  for (int64_t r = 0; r < mr; ++r) {
    if (read32) std::copy(o.c + r * o.ldc, o.c + r * o.ldc + nr, buf + r * kNr);
    if (to16 && beta != 0.0f) std::copy(o.c16 + r * o.ld16, o.c16 + r * o.ld16 + nr, buf16 + r * kNr);
  }
  WriteTile(acc, TileOut{buf, kNr, o.c16 ? buf16 : nullptr, kNr}, alpha, beta, first, last);
  for (int64_t r = 0; r < mr; ++r) {
    if (to16) std::copy(buf16 + r * kNr, buf16 + r * kNr + nr, o.c16 + r * o.ld16);
    else std::copy(buf + r * kNr, buf + r * kNr + nr, o.c + r * o.ldc);
  }
}

// C[m, n] = alpha * op(A) op(B) + beta * C on the calling thread: f32 C at c
// (row stride ldc), or bf16 C at c16 (row stride ld16) with c a scratch of
// [m, min(n, kNc)] floats (row stride ldc), the f32 sums of one B block's
// columns, used only when k spans several k blocks.
template <typename TA, typename TB>
void Region(int64_t m, int64_t n, int64_t k, Strided<TA> a, Strided<TB> b, float alpha, float beta, float* c,
            int64_t ldc, bfloat16* c16 = nullptr, int64_t ld16 = 0) {
  // Cache-line aligned, so that no vector load of a panel splits a line;
  // allocated once per thread at their largest (560 KiB in all), so that
  // products of changing shapes do not churn the heap.
  thread_local AlignedFloats apack, bpack;
  apack.reserve(size_t(kMc * kPackedGemmKc));
  bpack.reserve(size_t(kNc * kPackedGemmKc));
  const bool a_rows = a.cs == 1;
  for (int64_t jc = 0; jc < n; jc += kNc) {
    const int64_t nc = std::min(kNc, n - jc);
    float* cj = c == nullptr ? nullptr : c16 != nullptr ? c : c + jc;  // the scratch holds one B block
    for (int64_t pc = 0; pc < k; pc += kPackedGemmKc) {
      const int64_t kc = std::min(kPackedGemmKc, k - pc);
      const bool first = pc == 0, last = pc + kc == k;
      PackB(Strided<TB>{b.p + pc * b.rs + jc * b.cs, b.rs, b.cs}, kc, nc, bpack.data());
      for (int64_t ic = 0; ic < m; ic += kMc) {
        const int64_t mc = std::min(kMc, m - ic);
        PackA(Strided<TA>{a.p + ic * a.rs + pc * a.cs, a.rs, a.cs}, mc, kc, apack.data());
        for (int64_t jr = 0; jr < nc; jr += kNr)
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const float* ap = apack.data() + ir * kc;
            const float* bp = bpack.data() + jr * kc;
            const int64_t i = ic + ir, j = jc + jr;
            const TileOut o{cj ? cj + i * ldc + jr : nullptr, ldc, c16 ? c16 + i * ld16 + j : nullptr, ld16};
            const int64_t mr = std::min(kMr, mc - ir), nr = std::min(kNr, nc - jr);
            if (a_rows) Tile<true>(kc, ap, bp, o, mr, nr, alpha, beta, first, last);
            else Tile<false>(kc, ap, bp, o, mr, nr, alpha, beta, first, last);
          }
      }
    }
  }
}

// The exported entry points, one per operand types: f32 C (c, ldc), or bf16
// C (c16, ld16) with c the f32 scratch of Region.
template <typename TA, typename TB>
void RegionT(int64_t m, int64_t n, int64_t k, const TA* a, int64_t a_rs, int64_t a_cs, const TB* b, int64_t b_rs,
             int64_t b_cs, float alpha, float beta, float* c, int64_t ldc, bfloat16* c16, int64_t ld16) {
  if (c16 == nullptr) return Region<TA, TB>(m, n, k, {a, a_rs, a_cs}, {b, b_rs, b_cs}, alpha, beta, c, ldc);
  Region<TA, TB>(m, n, k, {a, a_rs, a_cs}, {b, b_rs, b_cs}, alpha, beta, c, std::min(n, kNc), c16, ld16);
}
#define T5X_PACKED_REGION(NAME, TA, TB)                                                                              \
  void NAME(int64_t m, int64_t n, int64_t k, const TA* a, int64_t a_rs, int64_t a_cs, const TB* b, int64_t b_rs,  \
            int64_t b_cs, float alpha, float beta, float* c, int64_t ldc, bfloat16* c16, int64_t ld16) {          \
    RegionT<TA, TB>(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, alpha, beta, c, ldc, c16, ld16);                       \
  }
T5X_PACKED_REGION(RegionF32, float, float)
T5X_PACKED_REGION(RegionBf16, bfloat16, bfloat16)
T5X_PACKED_REGION(RegionBf16Rounded, bfloat16, F32AsBf16)
T5X_PACKED_REGION(RegionRoundedBf16, F32AsBf16, bfloat16)
#undef T5X_PACKED_REGION

bool NativeFma() { return HWY_NATIVE_FMA != 0; }

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <omp.h>

#include "backend/cpu/simd.h"

namespace t5x::cpu {

HWY_EXPORT(RegionF32);
HWY_EXPORT(RegionBf16);
HWY_EXPORT(RegionBf16Rounded);
HWY_EXPORT(RegionRoundedBf16);
HWY_EXPORT(NativeFma);

bool packed_gemm_fast() { return T5X_DISPATCH(NativeFma)(); }

namespace {

// The region of C on this target: f32 C (c16 null), or bf16 C with c the
// f32 scratch.
#define T5X_PACKED_REGION_CALL(TA, TB, NAME)                                                                         \
  void region(int64_t m, int64_t n, int64_t k, const TA* a, int64_t a_rs, int64_t a_cs, const TB* b, int64_t b_rs, \
              int64_t b_cs, float alpha, float beta, float* c, int64_t ldc, bfloat16* c16, int64_t ld16) {        \
    T5X_DISPATCH(NAME)(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, alpha, beta, c, ldc, c16, ld16);                    \
  }
T5X_PACKED_REGION_CALL(float, float, RegionF32)
T5X_PACKED_REGION_CALL(bfloat16, bfloat16, RegionBf16)
T5X_PACKED_REGION_CALL(bfloat16, F32AsBf16, RegionBf16Rounded)
T5X_PACKED_REGION_CALL(F32AsBf16, bfloat16, RegionRoundedBf16)
#undef T5X_PACKED_REGION_CALL

// A task is one batch item's rows [r0, r1) x columns [c0, c1) of C.
struct Split {
  int64_t parts;   // per batch item
  bool rows;       // split m (else n)
  int64_t unit;    // boundaries are multiples of this
};

Split plan(const GemmShape& s, int64_t batch, int threads) {
  if (threads <= 1 || batch >= threads) return {1, true, 1};
  const int64_t parts = (threads + batch - 1) / batch;
  // Row parts in multiples of 6 (the register tile), columns of 32 (a whole
  // panel on every target), so that no part ends in a partial tile early.
  if (s.m >= s.n) return {std::min<int64_t>(parts, std::max<int64_t>(1, s.m / 6)), true, 6};
  return {std::min<int64_t>(parts, std::max<int64_t>(1, s.n / 32)), false, 32};
}

template <typename TA, typename TB, typename TC>
void run(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha, const TA* a,
         const TB* b, float beta, TC* c, int threads) {
  const int64_t a_rs = s.trans_a ? 1 : s.lda, a_cs = s.trans_a ? s.lda : 1;
  const int64_t b_rs = s.trans_b ? 1 : s.ldb, b_cs = s.trans_b ? s.ldb : 1;
  const Split sp = plan(s, batch, threads);
  const int64_t span = sp.rows ? s.m : s.n;
  auto bound = [&](int64_t q) {
    if (q >= sp.parts) return span;
    return std::min(span, (span * q / sp.parts + sp.unit - 1) / sp.unit * sp.unit);
  };
  const int64_t tasks = batch * sp.parts;
  auto task = [&](int64_t t) {
    const int64_t bi = t / sp.parts, q = t % sp.parts;
    const int64_t lo = bound(q), hi = bound(q + 1);
    if (lo >= hi) return;
    const int64_t r0 = sp.rows ? lo : 0, r1 = sp.rows ? hi : s.m;
    const int64_t c0 = sp.rows ? 0 : lo, c1 = sp.rows ? s.n : hi;
    const TA* ap = a + bi * sa + r0 * a_rs;
    const TB* bp = b + bi * sb + c0 * b_cs;
    TC* cp = c + bi * sc + r0 * s.ldc + c0;
    if constexpr (std::is_same_v<TC, float>) {
      region(r1 - r0, c1 - c0, s.k, ap, a_rs, a_cs, bp, b_rs, b_cs, alpha, beta, cp, s.ldc, nullptr, 0);
    } else {
      // f32 sums over the k blocks (a scratch when there are several), then
      // one rounding.
      thread_local std::vector<float> acc;
      const int64_t mt = r1 - r0, nt = c1 - c0;
      float* scratch = nullptr;
      if (s.k > kPackedGemmKc) {
        const size_t need = size_t(mt * std::min<int64_t>(nt, kPackedGemmNc));
        if (acc.size() < need) acc.resize(std::max(need, 2 * acc.size()));
        scratch = acc.data();
      }
      region(mt, nt, s.k, ap, a_rs, a_cs, bp, b_rs, b_cs, alpha, beta, scratch, 0, cp, s.ldc);
    }
  };
  const int used = int(std::min<int64_t>(threads, tasks));
  if (used <= 1 || omp_in_parallel()) {
    for (int64_t t = 0; t < tasks; ++t) task(t);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(used)
  for (int64_t t = 0; t < tasks; ++t) task(t);
}

}  // namespace

#define T5X_PACKED_GEMM(TA, TB, TC)                                                                              \
  void packed_gemm(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha, const TA* a, \
                   const TB* b, float beta, TC* c, int threads) {                                                 \
    run(s, batch, sa, sb, sc, alpha, a, b, beta, c, threads);                                                     \
  }
T5X_PACKED_GEMM(float, float, float)
T5X_PACKED_GEMM(bfloat16, bfloat16, float)
T5X_PACKED_GEMM(bfloat16, bfloat16, bfloat16)
T5X_PACKED_GEMM(bfloat16, F32AsBf16, float)
T5X_PACKED_GEMM(bfloat16, F32AsBf16, bfloat16)
T5X_PACKED_GEMM(F32AsBf16, bfloat16, float)
T5X_PACKED_GEMM(F32AsBf16, bfloat16, bfloat16)
#undef T5X_PACKED_GEMM

}  // namespace t5x::cpu
#endif
