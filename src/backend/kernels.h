// The backend-neutral kernel interface: what the op layer (src/ops) calls.
//
// The op layer never includes a backend/cpu or backend/cuda header. A
// primitive's eval_cpu() (ops/primitive.h) calls the kernels::cpu entry
// points below, on raw local buffers plus small shape / stride descriptors;
// a CUDA backend adds kernels::cuda with the same signatures (device
// pointers), called from eval_cuda(), in src/backend/cuda/<family>.cu with
// the CPU's file names. Descriptors and enums here are device-neutral.
//
// Every entry point takes buffers already allocated with the output's size,
// computes exactly what the op's contract in ops/*.h says (bitwise the same
// on every CPU target) and throws nothing: the op layer validated the call.
// 16-bit floats compute in float32 and round once on store.
//
// Implementations (CPU), one file per family:
//   backend/cpu/elementwise_generic.cpp  unary, binary, where, cast, float_test
//       (generic all-dtype loops in front of the Highway kernels of
//       backend/cpu/{unary,binary,convert}.cpp)
//   backend/cpu/reduce.cpp               reduce, softmax_rows, argmax_rows, cumsum
//   backend/cpu/copy.cpp                 copy, copy_into
//   backend/cpu/index.cpp                take, take_grad_f32, top_k_rows, one_hot
//   backend/cpu/random.cpp               uniform_from_bits, normal_from_uniform, ...
//   backend/cpu/matmul.cpp               gemm (oneDNN, backend/cpu/gemm.cpp)
//   backend/cpu/screened_argmax.cpp      logits_screen, screened_argmax, screened_candidates
//   backend/cpu/fused.cpp                rms_norm, gated_gelu, cross_entropy,
//       attention (the Highway kernels of their own files)
//   backend/cpu/fourier.cpp              fourier_mix (FFTW, libfftw3-dev)
//   backend/cpu/adafactor.cpp            adafactor_factored_update,
//       adafactor_unfactored_update, and their phases for split params
//       (t5x/optim/adafactor.cpp)
//   backend/cpu/adamw.cpp                adamw_update (t5x/optim/adamw.cpp)
//   backend/cpu/sgd.cpp                  sgd_update (t5x/optim/sgd.cpp)
//   backend/cpu/lion.cpp                 lion_update (t5x/optim/lion.cpp)
//   backend/cpu/grad_utils.cpp           sum_of_squares, clip_grads, accumulate_f32, all_finite
//       (t5x/optim/grad_utils.cpp)
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace t5x::kernels {

// Elementwise functions of one operand; the op names of ops/elementwise.h.
enum class UnaryKind { Neg, Abs, Sign, Square, Exp, Log, Tanh, Sqrt, Rsqrt, Sigmoid, Relu, Gelu, GeluGrad, Not };
// Elementwise functions of two operands; Eq .. Or write bool (uint8_t 0/1).
enum class BinaryKind { Add, Sub, Mul, Div, Max, Min, Eq, Ne, Lt, Le, Gt, Ge, And, Or };
// Reductions (sum, max, min; max and min propagate NaN).
enum class ReduceKind { Sum, Max, Min };
// Tests of a float value (isnan, isfinite), writing bool.
enum class FloatTest { IsNan, IsFinite };

// A row-major output of `sizes` (elements) read from N inputs; input k's
// element at output index (i_0, ..., i_r-1) is at sum_d i_d * strides[k][d]
// (0 where the input is broadcast along d).
template <size_t N>
struct Strided {
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> strides;
};

// [pre, n, post] view of an array around one dim (take's axis).
struct Split3 {
  int64_t pre = 1, n = 1, post = 1;
};

// Batched matrix product C[i] = A[i] B[i] of dense row-major matrices:
// A [m, k] ([k, m] when trans_a), B [k, n] ([n, k] when trans_b), C [m, n];
// batch i at offsets i*m*k, i*k*n, i*m*n.
struct GemmDims {
  int64_t batch = 0, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
};

// Fused attention (backend/cpu/attention.h has the contract): shapes in
// elements, optional bias / segment ids / masks as raw pointers.
enum class AttentionBias { kNone, kHeads /* [heads, q, kv] */, kBatchHeads /* [batch, heads, q, kv] */ };
struct AttentionDims {
  int64_t batch = 0, q_length = 0, kv_length = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
};
struct AttentionArgs {
  const float* bias = nullptr;
  AttentionBias bias_layout = AttentionBias::kNone;
  bool causal = false;
  const int32_t* q_segment_ids = nullptr;  // both or neither
  const int32_t* kv_segment_ids = nullptr;
  const uint8_t* q_mask = nullptr;
  const uint8_t* kv_mask = nullptr;
  float scale = 1.0f;
};

// Adafactor's per-step float32 hyper-parameters, as t5x/optim/adafactor.cpp
// derives them from AdafactorConfig and the step (t5x/optim/adafactor.h has
// the rule and its sources).
struct AdafactorScalars {
  float decay = 0, mixing = 0, eps1 = 0, eps2 = 0;
  bool has_max_parameter_scale = false;
  float max_parameter_scale = 0;
  float lr = 0;
  bool use_scale = true;  // multiply_by_parameter_scale
  bool clip = false;      // clipping_threshold set
  float clipping_threshold = 1;
  float b1 = 0, one_minus_b1 = 0;  // momentum (used when m != nullptr)
  float keep_w = 1;                // 1 - weight_decay_rate (1 when unset)
  bool skip_nan = false;           // skip_nan_updates
  float grad_scale = 1;            // global-norm clipping factor
};

// A factored param viewed as [nb, n_outer, n_inner] (row-major): nb = the
// product of its leading BATCH dims, then one contiguous group of ROW dims
// and one of COLUMN dims, in either order. v_row is [nb, rows], v_col
// [nb, cols].
struct FactoredLayout {
  int64_t nb = 1, n_outer = 1, n_inner = 1;
  bool row_outer = true;  // ROW dims come first (v_row indexed by the outer index)
};

// The stateless optax clips that t5x's optimizers.chain puts before an
// optimizer (t5x/optim/grad_utils.h ChainedClips), applied to each gradient
// value in float32 as it is read, in this order:
//   scale (optax.clip_by_global_norm, on a step that clips):
//     g = (g / norm) * max_norm
//   clamp (optax.clip, jnp.clip): g = g > max_delta ? max_delta
//                                   : g < -max_delta ? -max_delta : g
//     (a NaN stays NaN, as jnp.clip keeps it)
// backend/cpu/simd-inl.h ClipGrad is the one formula every kernel uses.
struct GradClip {
  bool scale = false;
  float norm = 1, max_norm = 1;
  bool clamp = false;
  float max_delta = 0;
  bool any() const { return scale || clamp; }
};

// AdamW's per-step float32 constants, as t5x/optim/adamw.cpp derives them
// (optax.adamw): bias_correction{1,2} = 1 - b{1,2}^count, step_size = -lr.
struct AdamWScalars {
  float b1 = 0.9f, b2 = 0.999f, one_minus_b1 = 0.1f, one_minus_b2 = 0.001f;
  float bias_correction1 = 1, bias_correction2 = 1;
  float eps = 1e-8f, eps_root = 0, weight_decay = 0, step_size = 0;
  GradClip clip;  // the chain's clips before the update (f32 gradients)
};

// Lion's per-step float32 constants, as t5x/optim/lion.cpp derives them
// (optax.lion): step_size = -lr.
struct LionScalars {
  float b1 = 0.9f, b2 = 0.99f, one_minus_b1 = 0.1f, one_minus_b2 = 0.01f;
  float weight_decay = 0, step_size = 0;
  GradClip clip;  // the chain's clips before the update (f32 gradients)
};

// SGD's per-step float32 constants, as t5x/optim/sgd.cpp derives them
// (optax.sgd): momentum = trace's decay, step_size = -lr.
struct SgdScalars {
  float momentum = 0, step_size = 0;
  bool nesterov = false;
  GradClip clip;  // the chain's clips before the update (f32 gradients)
};

namespace cpu {

// out[i] = op(x[i]) for i < n; x and out of `dtype`.
void unary(UnaryKind op, DType dtype, const void* x, void* out, int64_t n);
// out = op(a, b) over s (out of `dtype`, or bool for comparisons).
void binary(BinaryKind op, DType dtype, const Strided<2>& s, const void* a, const void* b, void* out);
// The same for a, b and out of one shape, n elements: runs a flat kernel and
// returns true when the backend has one for (op, dtype) (add, sub, mul of
// f32, bf16); else returns false without writing (call binary()).
bool binary_dense(BinaryKind op, DType dtype, int64_t n, const void* a, const void* b, void* out);
// out = cond ? x : y over s (strides in the order cond, x, y).
void where(DType dtype, const Strided<3>& s, const uint8_t* cond, const void* x, const void* y, void* out);
// out[i] = test(float(x[i])) as 0/1; x of a floating dtype.
void float_test(FloatTest test, DType dtype, const void* x, uint8_t* out, int64_t n);
// out[i] = x[i] converted from `from` to `to` (to bool: x != 0).
void cast(DType from, DType to, const void* x, void* out, int64_t n);


// Reductions (backend/cpu/reduce.cpp). Floats accumulate in double, integers
// in themselves. columns = false: out[r] = op over c of x[r * cols + c];
// columns = true: out[r] = op over c of x[c * rows + r] (reduced dims leading).
void reduce(ReduceKind op, DType dtype, const void* x, void* out, int64_t rows, int64_t cols, bool columns);
// Softmax (log = false) or log-softmax of each contiguous row of n; floating dtypes.
void softmax_rows(bool log, DType dtype, const void* x, void* out, int64_t rows, int64_t n);
// out[r] = first index of the largest value of row r (of n >= 1); a NaN wins.
void argmax_rows(DType dtype, const void* x, int32_t* out, int64_t rows, int64_t n);
// Cumulative sum along the middle dim of x[outer, n, inner] (row-major).
void cumsum(DType dtype, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
            bool reverse);

// Copies by element size (backend/cpu/copy.cpp). copy: dst (row-major over
// s.sizes) = src read through s.strides[0] (transposes, broadcasts, block
// reads; tiled: cache-blocked when src's unit-stride dim is not dst's last).
// copy_into: dst[sum_d i_d * s.strides[0][d]] = src (row-major over s.sizes).
void copy(size_t elem_bytes, const Strided<1>& s, const void* src, void* dst, bool tiled);
void copy_into(size_t elem_bytes, const Strided<1>& s, const void* src, void* dst);

// Gathers and scatters (backend/cpu/index.cpp). take: out[p, i, :] =
// x[p, ids[i], :] (x viewed as s, ids in [0, s.n)); take_grad_f32: gx (zeroed
// here) [p, ids[i], :] += g[p, i, :], ids walked in order (deterministic sums);
// take_grad_add_f32: gx += that gradient without zeroing, with the bits of
// adding take_grad_f32's result (each row's contributions summed from zero in
// ids order, then added to gx once; rows no id names are left as they are);
// top_k_rows: the k largest of each row of n (ties: lower index first), in
// order; one_hot: out (zero-filled, [n, depth]) [i, ids[i]] = 1 for ids in range.
void take(size_t elem_bytes, const Split3& s, const int64_t* ids, int64_t ni, const void* x, void* out);
void take_grad_f32(const Split3& s, const int64_t* ids, int64_t ni, const float* g, float* gx);
void take_grad_add_f32(const Split3& s, const int64_t* ids, int64_t ni, const float* g, float* gx);
void top_k_rows(const float* x, int64_t rows, int64_t n, int64_t k, float* values, int32_t* indices);
void one_hot(DType dtype, const int64_t* ids, int64_t n, int64_t depth, void* out);

// Random transforms (backend/cpu/random.cpp), elementwise, as jax.random:
// uniform_from_bits: out = max(lo, fma(unit_float(bits), hi - lo, lo));
// normal_from_uniform: u = sqrt(2) erfinv(u); truncated_normal_from_uniform:
// the same clamped to [clip_lo, clip_hi]; gumbel_from_uniform: u = -log(-log(u)).
void uniform_from_bits(const uint32_t* bits, int64_t n, float lo, float hi, float* out);
void normal_from_uniform(float* u, int64_t n);
void truncated_normal_from_uniform(float* u, int64_t n, float clip_lo, float clip_hi);
void gumbel_from_uniform(float* u, int64_t n);

// Matrix products (backend/cpu/matmul.cpp, on backend/cpu/gemm.h): a and b of
// `in` (f32 or bf16), f32 accumulation; c of `out` (f32, or bf16 for bf16
// inputs: one rounding of the f32 accumulators).
void gemm(const GemmDims& g, DType in, DType out, const void* a, const void* b, void* c);
// The bf16 gemm on operands stored f32 or bf16 (a_dtype, b_dtype): an f32
// operand is taken as cast(operand, bf16), bitwise, without a cast pass where
// the packed GEMM runs the product (backend/cpu/gemm.h). out f32 or bf16.
void gemm_as_bf16(const GemmDims& g, DType a_dtype, DType b_dtype, DType out, const void* a, const void* b, void* c);
// Whether gemm_as_bf16 rounds an f32 operand as it packs it here (bf16
// products on the packed GEMM); elsewhere it casts it first, on every call,
// so a caller using one operand in several products casts it once instead.
bool gemm_as_bf16_rounds_in_packing();
// Greedy decoding's next tokens from a few-row product without reading its
// whole f32 kernel (backend/cpu/screened_argmax.cpp; ops/einsum.h
// screened_dense_argmax). logits_screen: wt [n, k] f32 -> screen [n, k] bf16
// (wt rounded to nearest even) and bounds [n, 2] f32 (per row of wt, the
// error bound's two coefficients). screened_argmax, for m up to
// kScreenedArgmaxMaxRows (the rows gemm gives its skinny kernel): out[r] =
// argmax_rows of row r of x [m, k] · wtᵀ as gemm computes it, bitwise,
// reading the screen whole and wt only where the bound leaves candidates.
constexpr int64_t kScreenedArgmaxMaxRows = 8;
void logits_screen(int64_t n, int64_t k, const float* wt, void* screen, float* bounds);
void screened_argmax(int64_t m, int64_t n, int64_t k, const float* x, const float* wt, const void* screen,
                     const float* bounds, int32_t* out);
// screened_candidates: the same screen for sampling's top-k (keep >= 1, else
// std::invalid_argument): out[r] (m of them) gets columns of row r, index
// ascending, with their outputs as gemm computes them, bitwise (value). They
// include every column whose output is at least the row's keep-th largest
// (ties included), and may include more; the whole row where the screen
// cannot narrow it (a non-finite value, keep > n / 4, too many candidates).
struct ScreenedCandidates {
  std::vector<int32_t> index;
  std::vector<float> value;
};
void screened_candidates(int64_t m, int64_t n, int64_t k, const float* x, const float* wt, const void* screen,
                         const float* bounds, int64_t keep, ScreenedCandidates* out);
// Whether gemm sums an element of a row or column block of a product in the
// order it sums the whole product, so that a product split into blocks equals
// the whole one bitwise (probed once on this CPU; backend/cpu/gemm.h says
// which products keep it). Mesh-invariant runs equal one process bitwise only
// where it holds.
bool gemm_block_invariant();

// Fused kernels of ops/fused.h (backend/cpu/fused.cpp). x, y, dx, dy, h0,
// h1, out of `dtype` (f32 or bf16); scale, rstd, dscale, logits, loss f32.
void rms_norm_forward(DType dtype, int64_t rows, int64_t embed, const void* x, const float* scale, float eps, void* y,
                      float* rstd);
void rms_norm_backward(DType dtype, int64_t rows, int64_t embed, const void* x, const float* scale, const float* rstd,
                       const void* dy, float eps, void* dx, float* dscale);
void gated_gelu_forward(DType dtype, int64_t n, const void* h0, const void* h1, void* out);
void gated_gelu_backward(DType dtype, int64_t n, const void* h0, const void* h1, const void* dout, void* dh0,
                         void* dh1);
void cross_entropy_forward(int64_t rows, int64_t vocab, const float* logits, const int32_t* targets, float z_loss,
                           float label_smoothing, float* loss, float* z_loss_out, float* lse_out);
void cross_entropy_backward(int64_t rows, int64_t vocab, const float* logits, const int32_t* targets,
                            const float* lse, const float* dloss, float z_loss, float label_smoothing,
                            float* dlogits);
// q in q_dtype, k and v in kv_dtype: all f32 or all bf16 (bf16 activations,
// a bf16 decode cache); bf16 is read as is and widened exactly in the tiles,
// the same bits as widening it first. lse and
// logl [batch, heads, q_length] (either may be null without a backward):
// logl carries the log-sum of the rows with no allowed key, which lse cannot
// hold in f32 (backend/cpu/attention.h); the backward reads both.
void attention_forward(const AttentionDims& s, const AttentionArgs& p, DType q_dtype, const void* q, DType kv_dtype,
                       const void* k, const void* v, float* out, float* lse, float* logl);
// q, k and v all in qkv_dtype (f32 or bf16); out, dout and the gradients f32.
void attention_backward(const AttentionDims& s, const AttentionArgs& p, DType qkv_dtype, const void* q, const void* k,
                        const void* v, const float* out, const float* lse, const float* logl, const float* dout,
                        float* dq, float* dk, float* dv, float* dbias);

// FNet's Fourier mixing (ops/fourier.h): for each of `batch` row-major f32
// [length, embed] blocks, y = Re(F_length x F_embed), F_n[j,k] = exp(-2 pi i jk/n),
// unnormalised. Its own transpose, so it is also the vjp. Deterministic from
// run to run (FFTW_ESTIMATE plans), but, unlike the Highway kernels, not
// bitwise the same on every CPU: FFTW picks its SIMD codelets for the CPU.
void fourier_mix(int64_t batch, int64_t length, int64_t embed, const float* x, float* y);

// One Adafactor step of one param, in place (backend/cpu/adafactor.cpp): the
// rule of t5x/optim/adafactor.h on a whole, unsplit param, in the float32
// expressions of its generic element walk, reading grad * s.grad_scale.
// factored: param, grad, m [nb, n_outer, n_inner]; v_row [nb, rows], v_col
// [nb, cols] (FactoredLayout). unfactored: param, grad, v, m [nb, n]; the
// means run over n. m is nullptr without momentum.
// The means' float64 sums add 8-lane partial sums over runs of <= 512 values
// along a row and <= 32 rows down a column, combined in order, so they round
// to the generic walk's float32 but where a sum straddles a rounding
// boundary. Chunk boundaries depend on the shape only: the same bits on any
// thread count and on every SIMD target. Empty params return at once.
void adafactor_factored_update(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad,
                               float* v_row, float* v_col, float* m);
void adafactor_unfactored_update(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad,
                                 float* v, float* m);

// The same update in phases, for a param split across processes
// (t5x/optim/adafactor.cpp): each phase is one pass over this process's
// shard, and the caller turns the local float64 sums into the global
// statistics between them (all-reduce / all-gather). Shapes as above, of the
// local shard; per-batch vectors are [nb].
//  1. adafactor_factored_stats: psum[b] = sum p^2; row_sums [nb, rows] and
//     col_sums [nb, cols] of (g * grad_scale)^2 + eps1.
//     adafactor_unfactored_stats: updates v (the moving average) and gives
//     psum[b] and ysum[b] = sum y^2, y = g / sqrt(v).
//  2. adafactor_factored_clip_sums (when clipping): ysum[b] = sum y^2 with
//     y = g * row_factor * col_factor ([nb, rows], [nb, cols]; the factors
//     of the global v_row / v_col, this shard's slice).
//  3. adafactor_*_apply: param (and m) from y, with the step size scale[b]
//     (lr, times the param scale) and the clipping divisor denom[b].
// Each element's float32 expressions are those of the whole-param update.
void adafactor_factored_stats(const FactoredLayout& l, const AdafactorScalars& s, const float* param,
                              const float* grad, double* psum, double* row_sums, double* col_sums);
void adafactor_factored_clip_sums(const FactoredLayout& l, const AdafactorScalars& s, const float* grad,
                                  const float* row_factor, const float* col_factor, double* ysum);
void adafactor_factored_apply(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad,
                              const float* row_factor, const float* col_factor, const float* scale,
                              const float* denom, float* m);
void adafactor_unfactored_stats(int64_t nb, int64_t n, const AdafactorScalars& s, const float* param,
                                const float* grad, float* v, double* psum, double* ysum);
void adafactor_unfactored_apply(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad,
                                const float* v, const float* scale, const float* denom, float* m);

// One AdamW step of n elements, in place (backend/cpu/adamw.cpp), in optax's
// order ([the chain's clips,] scale_by_adam, add_decayed_weights,
// scale_by_learning_rate):
//   [g = ClipGrad(g, s.clip)]          (GradClip above)
//   mu = (1-b1) g + b1 mu;  nu = (1-b2) g^2 + b2 nu
//   u = (mu / bc1) / (sqrt(nu / bc2 + eps_root) + eps)  [+ weight_decay * param]
//   param = param + u * step_size
// float32, unfused; the same bits on every target and thread count.
void adamw_update(int64_t n, const AdamWScalars& s, float* param, const float* grad, float* mu, float* nu);

// One Lion step of n elements, in place (backend/cpu/lion.cpp), in optax's
// order ([the chain's clips,] scale_by_lion, add_decayed_weights,
// scale_by_learning_rate, apply_updates):
//   [g = ClipGrad(g, s.clip)]
//   u = sign((1-b1) g + b1 mu)          (sign(+-0) = +-0, sign(NaN) = NaN, as jnp.sign)
//   mu = (1-b2) g + b2 mu
//   [u = u + weight_decay * param]      (skipped when weight_decay is 0, as optax)
//   param = param + u * step_size
// float32, unfused; the same bits on every target and thread count.
void lion_update(int64_t n, const LionScalars& s, float* param, const float* grad, float* mu);

// One SGD step of n elements, in place (backend/cpu/sgd.cpp), in optax's
// order ([the chain's clips,] [trace,] scale_by_learning_rate, apply_updates):
//   [g = ClipGrad(g, s.clip)]
//   trace != nullptr:  t = g + momentum t;  u = nesterov ? g + momentum t : t
//   trace == nullptr:  u = g                (optax.sgd with momentum=None)
//   param = param + u * step_size
// float32, unfused; the same bits on every target and thread count.
void sgd_update(int64_t n, const SgdScalars& s, float* param, const float* grad, float* trace);

// Gradient utilities (backend/cpu/grad_utils.cpp), x of `dtype` (f32, bf16
// or f16), n values:
// sum_of_squares: sum of float64(x)^2 (each square exact), summed over 8
//   lanes in chunks of 2^16 values, the chunks' totals added in order: the
//   same bits on every target and thread count (the global norm's sum).
// clip_grads: out = ClipGrad(float(x), clip) (GradClip above), rounded once
//   to `dtype`: optax clip_by_global_norm's (t / g_norm) * max_norm and
//   optax.clip's clamp, for gradients an update kernel cannot clip as it reads.
// accumulate_f32: acc += float(x) (microbatch gradient sums).
// all_finite: no NaN and no infinity among the n values (the trainer's check
//   of the updated parameters; reads x in place, on all threads).
double sum_of_squares(DType dtype, const void* x, int64_t n);
void clip_grads(DType dtype, const void* x, int64_t n, const GradClip& clip, void* out);
void accumulate_f32(DType dtype, const void* x, int64_t n, float* acc);
bool all_finite(DType dtype, const void* x, int64_t n);

}  // namespace cpu
}  // namespace t5x::kernels
