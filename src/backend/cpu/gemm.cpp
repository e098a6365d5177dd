// The gemm interface (gemm.h): the skinny kernel for few rows, our packed
// GEMM or oneDNN's matmul by the choice below (impl_for), and oneDNN on
// widened operands for bf16 where neither serves it.
//
// One engine for the process; one stream and one scratchpad buffer per calling
// thread (oneDNN 2.6 built without DNNL_ENABLE_CONCURRENT_EXEC shares a
// library-owned scratchpad between executions, so we own it instead).
// Primitives are created once per (dtype, shape, transposes, strides, alpha,
// beta) and kept in a mutex-guarded map; creating one costs ~0.1-1 ms (JIT).
//
// bf16 products where oneDNN has no bf16 matmul (oneDNN 2.6 needs AVX-512 for
// one) run on the packed GEMM, or, without FMA in the SIMD target (SSE4),
// widen their operands to f32 and run oneDNN's f32 product: the same contract
// (f32 accumulation, one rounding of a bf16 output), since bf16 -> f32 is
// exact.
#include "backend/cpu/gemm.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/packed_gemm.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/skinny_gemm.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

namespace t5x::cpu {
namespace {

using dnnl::memory;

struct Key {
  // All 8-byte fields so the struct has no padding and hashes bytewise.
  int64_t dtype;  // 0 = f32, 1 = bf16 -> f32, 2 = bf16 -> bf16
  int64_t m, n, k, batch_a, batch_b, batch;
  int64_t ta, tb;
  int64_t lda, ldb, ldc, sa, sb, sc;
  int64_t alpha_bits, beta_bits;
  int64_t threads;  // oneDNN partitions work for the thread count at creation
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    // FNV-1a over the raw bytes.
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return size_t(h);
  }
};

struct Cached {
  dnnl::matmul prim;
  memory::desc a_md, b_md, c_md, scratch_md;
  size_t scratch_bytes = 0;
};

dnnl::engine& engine() {
  // T5X_CPU_ISA may cap oneDNN's ISA, which must happen before its first use.
  static dnnl::engine eng = [] {
    simd_init();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return eng;
}

struct ThreadState {
  dnnl::stream stream{engine()};
  std::vector<unsigned char> scratch;
};

ThreadState& thread_state() {
  thread_local ThreadState st;
  return st;
}

constexpr size_t kMaxCachedPrimitives = 2048;
std::mutex g_mu;
std::unordered_map<Key, std::shared_ptr<Cached>, KeyHash>& cache() {
  static std::unordered_map<Key, std::shared_ptr<Cached>, KeyHash> c;
  return c;
}

// Descriptor of a row-major matrix read as op(X) with shape [rows, cols];
// `ld` is the leading dim of the stored X. 2-d when the whole problem has one
// batch, else 3-d [batch, rows, cols] (a broadcast operand has batch 1).
memory::desc operand_md(memory::data_type dt, bool batched, int64_t batch,
                        int64_t stride, int64_t rows, int64_t cols, bool trans,
                        int64_t ld) {
  if (!batched)
    return memory::desc({rows, cols}, dt, trans ? memory::dims{1, ld} : memory::dims{ld, 1});
  int64_t span = (trans ? cols : rows) * ld;
  int64_t bstride = (batch == 1 || stride == 0) ? span : stride;
  return memory::desc({batch, rows, cols}, dt,
                      trans ? memory::dims{bstride, 1, ld} : memory::dims{bstride, ld, 1});
}

std::shared_ptr<Cached> get_or_create(const Key& key) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = cache().find(key);
    if (it != cache().end()) return it->second;
  }
  auto dt = key.dtype == 0 ? memory::data_type::f32 : memory::data_type::bf16;
  auto c = std::make_shared<Cached>();
  bool batched = key.batch > 1;
  c->a_md = operand_md(dt, batched, key.batch_a, key.sa, key.m, key.k, key.ta, key.lda);
  c->b_md = operand_md(dt, batched, key.batch_b, key.sb, key.k, key.n, key.tb, key.ldb);
  auto c_dt = key.dtype == 2 ? memory::data_type::bf16 : memory::data_type::f32;
  c->c_md = operand_md(c_dt, batched, key.batch, key.sc, key.m, key.n,
                       false, key.ldc);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  float alpha, beta;
  uint32_t ab = uint32_t(key.alpha_bits), bb = uint32_t(key.beta_bits);
  std::memcpy(&alpha, &ab, 4);
  std::memcpy(&beta, &bb, 4);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  try {
    dnnl::matmul::desc d(c->a_md, c->b_md, c->c_md);
    dnnl::matmul::primitive_desc pd(d, attr, engine());
    c->scratch_md = pd.scratchpad_desc();
    c->scratch_bytes = c->scratch_md.get_size();
    c->prim = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    throw std::invalid_argument(std::string("[gemm] oneDNN rejected the problem: ") +
                                e.what());
  }
  std::lock_guard<std::mutex> lock(g_mu);
  // Shapes that change every step (e.g. a growing kv length in decoding)
  // would grow the map without bound; start over past a cap. Callers still
  // hold their shared_ptr, so in-flight primitives stay alive.
  if (cache().size() >= kMaxCachedPrimitives) cache().clear();
  auto [it, inserted] = cache().emplace(key, c);
  return it->second;
}

// Below this many FLOPs a product runs single-threaded. T5X_GEMM_SMALL_FLOPS
// overrides it (0 disables).
double small_gemm_flops() {
  static const double v = [] {
    const char* e = std::getenv("T5X_GEMM_SMALL_FLOPS");
    return e ? std::atof(e) : 16e6;
  }();
  return v;
}

void check(const GemmShape& s, int64_t batch, int64_t& lda, int64_t& ldb,
           int64_t& ldc) {
  if (s.m < 0 || s.n < 0 || s.k < 0 || batch < 0)
    throw std::invalid_argument("[gemm] negative size: m=" + std::to_string(s.m) +
                                " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                                " batch=" + std::to_string(batch));
  int64_t a_cols = s.trans_a ? s.m : s.k;
  int64_t b_cols = s.trans_b ? s.k : s.n;
  lda = s.lda ? s.lda : a_cols;
  ldb = s.ldb ? s.ldb : b_cols;
  ldc = s.ldc ? s.ldc : s.n;
  if (lda < a_cols || ldb < b_cols || ldc < s.n)
    throw std::invalid_argument(
        "[gemm] leading dim smaller than row length: lda=" + std::to_string(lda) +
        " (rows of " + std::to_string(a_cols) + "), ldb=" + std::to_string(ldb) +
        " (rows of " + std::to_string(b_cols) + "), ldc=" + std::to_string(ldc) +
        " (rows of " + std::to_string(s.n) + ")");
}

// C = beta * C for the k == 0 case (oneDNN rejects empty reductions).
template <typename T>
void scale_c(const GemmShape& s, int64_t batch, int64_t sc, int64_t ldc, float beta, T* c) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < s.m; ++i) {
      T* row = c + b * sc + i * ldc;
      for (int64_t j = 0; j < s.n; ++j) row[j] = T(beta == 0.0f ? 0.0f : beta * float(row[j]));
    }
}

// Does oneDNN create a bf16 matmul on this CPU (after ONEDNN_MAX_CPU_ISA)?
// T5X_BF16_GEMM=f32 takes the widening path anyway (to test it anywhere).
bool probe_native_bf16() {
  const char* e = std::getenv("T5X_BF16_GEMM");
  if (e && std::string(e) == "f32") return false;
  try {
    memory::desc a({64, 64}, memory::data_type::bf16, memory::dims{64, 1});
    memory::desc c({64, 64}, memory::data_type::f32, memory::dims{64, 1});
    dnnl::matmul::desc d(a, a, c);
    dnnl::matmul::primitive_desc pd(d, engine());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

void run(int dtype, const GemmShape& s, int64_t batch, int64_t sa, int64_t sb,
         int64_t sc, float alpha, const void* a, const void* b, float beta, void* c);

// Which implementation runs products of a dtype (0: f32, else bf16), chosen
// once per process (see gemm.h's gemm_kernel).
enum class Impl { onednn, packed };

bool onednn_at_avx512() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
    case dnnl::cpu_isa::avx512_mic:
    case dnnl::cpu_isa::avx512_mic_4ops: return true;
    default: return false;
  }
}

Impl choose_impl(bool bf16) {
  simd_init();  // applies T5X_CPU_ISA's cap to oneDNN before it is queried
  const char* e = std::getenv("T5X_GEMM_KERNEL");
  const std::string forced = e ? e : "";
  if (forced == "packed") return Impl::packed;
  if (forced == "onednn") return Impl::onednn;
  if (!forced.empty() && forced != "auto")
    throw std::invalid_argument("[gemm] T5X_GEMM_KERNEL='" + forced + "': expected auto, packed or onednn");
  if (!packed_gemm_fast()) return Impl::onednn;
  // oneDNN's AVX-512 f32 and native bf16 products are the faster ones; its
  // AVX2 f32 products ran at or below ours on the training step's shapes
  // and far below on transposed-A ones (docs/performance.md).
  if (!bf16) return onednn_at_avx512() ? Impl::onednn : Impl::packed;
  return gemm_bf16_native() ? Impl::onednn : Impl::packed;
}

Impl impl_for(int dtype) {
  static const Impl f32 = choose_impl(false);
  static const Impl bf16 = choose_impl(true);
  return dtype == 0 ? f32 : bf16;
}

// Stored operand of `batch` matrices of `rows` x `cols` (leading dim `ld`,
// `stride` apart, 0 = broadcast), widened into `out` densely packed.
const float* widen(const bfloat16* x, int64_t batch, int64_t stride, int64_t rows,
                   int64_t cols, int64_t ld, std::vector<float>& out) {
  const int64_t n = (stride == 0 ? 1 : batch);
  out.resize(size_t(n * rows * cols));
  if (ld == cols && (n == 1 || stride == rows * cols)) {
    convert_bf16_to_f32(x, out.data(), n * rows * cols);
    return out.data();
  }
  // Strided rows (batched attention products): one pass over all rows,
  // threads only for large operands.
  const int64_t total_rows = n * rows;
  parallel_for(total_rows, std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, cols)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t q = r0; q < r1; ++q) {
                   const bfloat16* src = x + (q / rows) * stride + (q % rows) * ld;
                   float* dst = out.data() + q * cols;
                   for (int64_t c = 0; c < cols; ++c) dst[c] = float(src[c]);
                 }
               });
  return out.data();
}

// The bf16 product as an f32 product of the widened operands (see the top).
void run_bf16_via_f32(int dtype, const GemmShape& s, int64_t batch, int64_t sa, int64_t sb,
                      int64_t sc, int64_t lda, int64_t ldb, int64_t ldc, float alpha,
                      const bfloat16* a, const bfloat16* b, float beta, void* c) {
  // Per calling thread: gemm may be called from several threads at once.
  thread_local std::vector<float> wa, wb, wc;
  const int64_t a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const int64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  const bool bcast_a = batch > 1 && sa == 0, bcast_b = batch > 1 && sb == 0;
  const float* fa = widen(a, batch, batch > 1 ? (bcast_a ? 0 : sa) : 0, a_rows, a_cols, lda, wa);
  const float* fb = widen(b, batch, batch > 1 ? (bcast_b ? 0 : sb) : 0, b_rows, b_cols, ldb, wb);
  GemmShape fs = s;
  fs.lda = a_cols;
  fs.ldb = b_cols;
  const int64_t fsa = bcast_a ? 0 : a_rows * a_cols, fsb = bcast_b ? 0 : b_rows * b_cols;
  if (dtype == 1)
    return run(0, fs, batch, fsa, fsb, sc, alpha, fa, fb, beta, c);
  // bf16 output: alpha * A.B in f32, then + beta * C and one rounding, as
  // oneDNN's output scale and sum post-op do.
  wc.resize(size_t(batch * s.m * s.n));
  fs.ldc = s.n;
  run(0, fs, batch, fsa, fsb, s.m * s.n, alpha, fa, fb, 0.0f, wc.data());
  auto* cb = static_cast<bfloat16*>(c);
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r = 0; r < s.m; ++r) {
      const float* src = wc.data() + (i * s.m + r) * s.n;
      bfloat16* dst = cb + i * sc + r * ldc;
      if (beta == 0.0f) {
        convert_f32_to_bf16(src, dst, s.n);
      } else {
        for (int64_t j = 0; j < s.n; ++j) dst[j] = bfloat16(src[j] + beta * float(dst[j]));
      }
    }
}

// Whether a product with a non-empty C runs on the skinny kernel.
bool takes_skinny(const GemmShape& s, int64_t batch) {
  return batch == 1 && s.m <= kSkinnyMaxRows && !s.trans_a && s.n >= 256;
}

void run(int dtype, const GemmShape& s, int64_t batch, int64_t sa, int64_t sb,
         int64_t sc, float alpha, const void* a, const void* b, float beta, void* c) {
  int64_t lda, ldb, ldc;
  check(s, batch, lda, ldb, ldc);
  if (batch == 0 || s.m == 0 || s.n == 0) return;
  if (batch > 1 && sc == 0)
    throw std::invalid_argument("[gemm] stride_c must be non-zero when batch > 1");
  if (s.k == 0) {
    if (dtype == 2) return scale_c(s, batch, sc, ldc, beta, static_cast<bfloat16*>(c));
    return scale_c(s, batch, sc, ldc, beta, static_cast<float*>(c));
  }

  // Few rows (decode steps): a streaming kernel, on B as it is or stored
  // transposed ([n, k]: a decode's weight kept [out, in], read as one stream).
  if (takes_skinny(s, batch)) {
    auto skinny = [&](const auto* ta, auto* tc) {
      const auto* tb = static_cast<decltype(ta)>(b);
      if (s.trans_b) return skinny_gemm_bt(s.m, s.n, s.k, alpha, ta, lda, tb, ldb, beta, tc, ldc);
      return skinny_gemm(s.m, s.n, s.k, alpha, ta, lda, tb, ldb, beta, tc, ldc);
    };
    if (dtype == 0) return skinny(static_cast<const float*>(a), static_cast<float*>(c));
    if (dtype == 1) return skinny(static_cast<const bfloat16*>(a), static_cast<float*>(c));
    return skinny(static_cast<const bfloat16*>(a), static_cast<bfloat16*>(c));
  }

  if (impl_for(dtype) == Impl::packed) {
    GemmShape ps = s;
    ps.lda = lda; ps.ldb = ldb; ps.ldc = ldc;
    const int threads = gemm_threads_for(s, batch);
    if (dtype == 0)
      return packed_gemm(ps, batch, sa, sb, sc, alpha, static_cast<const float*>(a), static_cast<const float*>(b),
                         beta, static_cast<float*>(c), threads);
    if (dtype == 1)
      return packed_gemm(ps, batch, sa, sb, sc, alpha, static_cast<const bfloat16*>(a),
                         static_cast<const bfloat16*>(b), beta, static_cast<float*>(c), threads);
    return packed_gemm(ps, batch, sa, sb, sc, alpha, static_cast<const bfloat16*>(a), static_cast<const bfloat16*>(b),
                       beta, static_cast<bfloat16*>(c), threads);
  }
  if (dtype != 0 && !gemm_bf16_native())
    return run_bf16_via_f32(dtype, s, batch, sa, sb, sc, lda, ldb, ldc, alpha,
                            static_cast<const bfloat16*>(a), static_cast<const bfloat16*>(b), beta, c);

  Key key{};
  key.dtype = dtype;
  key.m = s.m; key.n = s.n; key.k = s.k;
  key.batch = batch;
  key.batch_a = (batch > 1 && sa == 0) ? 1 : batch;
  key.batch_b = (batch > 1 && sb == 0) ? 1 : batch;
  key.ta = s.trans_a; key.tb = s.trans_b;
  key.lda = lda; key.ldb = ldb; key.ldc = ldc;
  key.sa = batch > 1 ? sa : 0;
  key.sb = batch > 1 ? sb : 0;
  key.sc = batch > 1 ? sc : 0;
  uint32_t ab, bb;
  std::memcpy(&ab, &alpha, 4);
  std::memcpy(&bb, &beta, 4);
  key.alpha_bits = ab;
  key.beta_bits = bb;
  // Small products (decode steps) run on the calling thread: waking a team
  // costs more than the work, and a descheduled team member stalls it.
  double flops = 2.0 * double(s.m) * double(s.n) * double(s.k) * double(batch);
  int saved_threads = omp_get_max_threads();
  bool single = flops < small_gemm_flops() && saved_threads > 1;
  if (single) omp_set_num_threads(1);
  key.threads = omp_get_max_threads();
  struct Restore {
    bool on; int n;
    ~Restore() { if (on) omp_set_num_threads(n); }
  } restore{single, saved_threads};
  auto cached = get_or_create(key);

  ThreadState& st = thread_state();
  if (st.scratch.size() < cached->scratch_bytes) st.scratch.resize(cached->scratch_bytes);
  auto& eng = engine();
  memory am(cached->a_md, eng, const_cast<void*>(a));
  memory bm(cached->b_md, eng, const_cast<void*>(b));
  memory cm(cached->c_md, eng, c);
  memory scratch(cached->scratch_md, eng, st.scratch.data());
  cached->prim.execute(st.stream, {{DNNL_ARG_SRC, am},
                                   {DNNL_ARG_WEIGHTS, bm},
                                   {DNNL_ARG_DST, cm},
                                   {DNNL_ARG_SCRATCHPAD, scratch}});
  st.stream.wait();
}

// Stored f32 operand of `batch` matrices of `rows` x `cols` (leading dim
// `ld`, `stride` apart, 0 = broadcast), cast to bf16 into `out` densely.
const bfloat16* narrow(const float* x, int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld,
                       std::vector<bfloat16>& out) {
  const int64_t n = (stride == 0 ? 1 : batch);
  out.resize(size_t(n * rows * cols));
  if (ld == cols && (n == 1 || stride == rows * cols)) {
    convert_f32_to_bf16(x, out.data(), n * rows * cols);
    return out.data();
  }
  for (int64_t q = 0; q < n * rows; ++q)
    convert_f32_to_bf16(x + (q / rows) * stride + (q % rows) * ld, out.data() + q * cols, cols);
  return out.data();
}

}  // namespace

void gemm_batched_as_bf16(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha,
                          const void* a, bool a_f32, const void* b, bool b_f32, float beta, void* c, bool c_bf16) {
  const int dtype = c_bf16 ? 2 : 1;
  if (!a_f32 && !b_f32) return run(dtype, s, batch, sa, sb, sc, alpha, a, b, beta, c);
  int64_t lda, ldb, ldc;
  check(s, batch, lda, ldb, ldc);
  if (impl_for(1) == Impl::packed && a_f32 != b_f32 && !takes_skinny(s, batch) && batch > 0 && s.m > 0 &&
      s.n > 0 && s.k > 0 && !(batch > 1 && sc == 0)) {
    GemmShape ps = s;
    ps.lda = lda; ps.ldb = ldb; ps.ldc = ldc;
    const int threads = gemm_threads_for(s, batch);
    if (b_f32) {
      const auto* a16 = static_cast<const bfloat16*>(a);
      const auto* br = static_cast<const F32AsBf16*>(b);
      if (c_bf16) return packed_gemm(ps, batch, sa, sb, sc, alpha, a16, br, beta, static_cast<bfloat16*>(c), threads);
      return packed_gemm(ps, batch, sa, sb, sc, alpha, a16, br, beta, static_cast<float*>(c), threads);
    }
    const auto* ar = static_cast<const F32AsBf16*>(a);
    const auto* b16 = static_cast<const bfloat16*>(b);
    if (c_bf16) return packed_gemm(ps, batch, sa, sb, sc, alpha, ar, b16, beta, static_cast<bfloat16*>(c), threads);
    return packed_gemm(ps, batch, sa, sb, sc, alpha, ar, b16, beta, static_cast<float*>(c), threads);
  }
  // Elsewhere the f32 operands are cast first (per calling thread: gemm may
  // be called from several threads at once).
  thread_local std::vector<bfloat16> na, nb;
  const int64_t a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const int64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  const bool bcast_a = batch > 1 && sa == 0, bcast_b = batch > 1 && sb == 0;
  GemmShape fs = s;
  int64_t fsa = sa, fsb = sb;
  if (a_f32) {
    a = narrow(static_cast<const float*>(a), batch, batch > 1 ? (bcast_a ? 0 : sa) : 0, a_rows, a_cols, lda, na);
    fs.lda = a_cols;
    fsa = bcast_a ? 0 : a_rows * a_cols;
  }
  if (b_f32) {
    b = narrow(static_cast<const float*>(b), batch, batch > 1 ? (bcast_b ? 0 : sb) : 0, b_rows, b_cols, ldb, nb);
    fs.ldb = b_cols;
    fsb = bcast_b ? 0 : b_rows * b_cols;
  }
  run(dtype, fs, batch, fsa, fsb, sc, alpha, a, b, beta, c);
}

bool gemm_bf16_native() {
  static const bool native = probe_native_bf16();
  return native;
}

namespace {

// Row halves, column halves and 1 vs all threads of a few small products,
// f32 and bf16, against the whole product's bits (see gemm_block_invariant).
bool probe_block_invariant() {
  struct P { int64_t m, n, k; bool ta, tb; };
  const P probes[] = {{64, 64, 64, false, false}, {64, 64, 64, false, true},
                      {48, 40, 200, true, true}, {128, 96, 256, true, false}};
  uint32_t state = 12345;
  auto next = [&] { state = state * 1664525u + 1013904223u; return float(int(state >> 9) % 2001 - 1000) / 1000.0f; };
  const int all = omp_get_max_threads();
  for (const P& p : probes) {
    std::vector<float> a(size_t(p.m * p.k)), b(size_t(p.k * p.n));
    for (auto& x : a) x = float(bfloat16(next()));
    for (auto& x : b) x = float(bfloat16(next()));
    // op(A) rows [r0, r0 + rows) and op(B) columns [c0, c0 + cols), packed.
    auto block = [&](bool bf16, int64_t r0, int64_t rows, int64_t c0, int64_t cols, int threads) {
      std::vector<float> pa(size_t(rows * p.k)), pb(size_t(p.k * cols));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t q = 0; q < p.k; ++q)
          (p.ta ? pa[size_t(q * rows + i)] : pa[size_t(i * p.k + q)]) =
              p.ta ? a[size_t(q * p.m + r0 + i)] : a[size_t((r0 + i) * p.k + q)];
      for (int64_t q = 0; q < p.k; ++q)
        for (int64_t j = 0; j < cols; ++j)
          (p.tb ? pb[size_t(j * p.k + q)] : pb[size_t(q * cols + j)]) =
              p.tb ? b[size_t((c0 + j) * p.k + q)] : b[size_t(q * p.n + c0 + j)];
      std::vector<float> c(size_t(rows * cols));
      const GemmShape s{rows, cols, p.k, p.ta, p.tb};
      omp_set_num_threads(threads);
      if (bf16) {
        std::vector<bfloat16> pa16(pa.begin(), pa.end()), pb16(pb.begin(), pb.end());
        gemm_batched_bf16(s, 1, 0, 0, 0, 1.0f, pa16.data(), pb16.data(), 0.0f, c.data());
      } else {
        gemm_f32(s, 1.0f, pa.data(), pb.data(), 0.0f, c.data());
      }
      omp_set_num_threads(all);
      return c;
    };
    for (bool bf16 : {false, true}) {
      const auto whole = block(bf16, 0, p.m, 0, p.n, all);
      for (int threads : {1, all})
        for (int h = 0; h < 2; ++h) {
          const auto rows = block(bf16, h * p.m / 2, p.m / 2, 0, p.n, threads);
          for (int64_t i = 0; i < p.m / 2; ++i)
            for (int64_t j = 0; j < p.n; ++j)
              if (rows[size_t(i * p.n + j)] != whole[size_t((h * p.m / 2 + i) * p.n + j)]) return false;
          const auto cols = block(bf16, 0, p.m, h * p.n / 2, p.n / 2, threads);
          for (int64_t i = 0; i < p.m; ++i)
            for (int64_t j = 0; j < p.n / 2; ++j)
              if (cols[size_t(i * p.n / 2 + j)] != whole[size_t(i * p.n + h * p.n / 2 + j)]) return false;
        }
    }
  }
  return true;
}

}  // namespace

bool gemm_block_invariant() {
  static const bool invariant = probe_block_invariant();
  return invariant;
}

const char* gemm_kernel(bool bf16) {
  if (impl_for(bf16 ? 1 : 0) == Impl::packed) return "packed";
  if (!bf16) return "oneDNN";
  return gemm_bf16_native() ? "oneDNN" : "oneDNN via f32";
}

int gemm_threads_for(const GemmShape& s, int64_t batch) {
  double flops = 2.0 * double(s.m) * double(s.n) * double(s.k) * double(batch);
  return flops < small_gemm_flops() ? 1 : omp_get_max_threads();
}

void gemm_f32(const GemmShape& s, float alpha, const float* a, const float* b,
              float beta, float* c) {
  run(0, s, 1, 0, 0, 0, alpha, a, b, beta, c);
}

void gemm_batched_f32(const GemmShape& s, int64_t batch, int64_t stride_a,
                      int64_t stride_b, int64_t stride_c, float alpha, const float* a,
                      const float* b, float beta, float* c) {
  run(0, s, batch, stride_a, stride_b, stride_c, alpha, a, b, beta, c);
}

void gemm_batched_bf16(const GemmShape& s, int64_t batch, int64_t stride_a,
                       int64_t stride_b, int64_t stride_c, float alpha,
                       const bfloat16* a, const bfloat16* b, float beta, float* c) {
  run(1, s, batch, stride_a, stride_b, stride_c, alpha, a, b, beta, c);
}

void gemm_batched_bf16_out_bf16(const GemmShape& s, int64_t batch, int64_t stride_a,
                                int64_t stride_b, int64_t stride_c, float alpha,
                                const bfloat16* a, const bfloat16* b, float beta,
                                bfloat16* c) {
  run(2, s, batch, stride_a, stride_b, stride_c, alpha, a, b, beta, c);
}

}  // namespace t5x::cpu
