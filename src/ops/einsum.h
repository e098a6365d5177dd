// Einsum over named dims (Mesh-TensorFlow's mtf.einsum): contraction by name.
//
//   einsum(x[batch, length, embed], w[embed, mlp], {"batch", "length", "mlp"})
//     -> [batch, length, mlp], summing over "embed".
// Rules, per dim name:
//   - in both operands and in the output: batch dim (kept, elementwise);
//   - in both operands, not in the output: contracted (summed);
//   - in one operand and in the output: free dim;
//   - in one operand only, not in the output: summed out first.
// The output lists dims in the requested order. Same-named dims must have
// equal sizes. The string form spells the operand dims too and checks them:
//   einsum("batch length embed, embed mlp -> batch length mlp", x, w)
//
// Dtypes: both operands share a dtype: f32 (oneDNN f32 GEMM), bf16 (bf16 GEMM
// with f32 accumulation, rounded to bf16) or f16 (computed in f32), unless
// EinsumPrecision::operand_dtype names the one to cast them to. Integer
// einsum is not supported.
// Lowering: each operand is transposed (only when needed) to
// [batch..., free..., contracted...] and the product runs as one
// kernels::cpu::gemm call (backend/kernels.h).
// Errors: "[einsum] output dim 'vocab' is in neither operand",
// "[einsum] dim 'embed' has size 512 in x[...] but 256 in y[...]",
// "[einsum] spec lists 'mlp' for y but y is float32[embed=4, hidden=3]".
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/array.h"

namespace t5x {

Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out_dims);
Array einsum(const std::string& spec, const Array& x, const Array& y);

// Precision of a bfloat16 einsum. The product runs on bfloat16 operands with
// float32 accumulators; by default its result is rounded to bfloat16 once, and
// so are the operands' cotangents, except those summed over 'batch' (weight
// gradients), which stay float32 (wide cotangents, ops/autodiff.h). For sums
// that continue across processes:
//   wide_result: the result is float32 (JAX's preferred_element_type);
//   wide_grads: both operands' cotangents are float32.
// operand_dtype: both operands are taken as cast(operand, operand_dtype)
// first, and the product runs in that dtype (flax's DenseGeneral casting its
// float32 kernel to the module's dtype; the dtype rules above then hold for
// the cast operands). The result and the cotangents are bitwise those of
// einsum(cast(x), cast(y)) with the casts' vjps (an operand's cotangent has
// its own dtype). For a float32 operand of a bfloat16 product no cast pass
// runs where the packed GEMM serves it: the product rounds the operand as it
// reads it (the CPU backend's gemm_as_bf16); where bf16 products run elsewhere (oneDNN's
// native bf16) the operand is cast once, up front.
struct EinsumPrecision {
  bool wide_result = false;
  bool wide_grads = false;
  std::optional<DType> operand_dtype = std::nullopt;
};
Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out_dims, EinsumPrecision precision);

// Whether the product giving `operand`'s cotangent from einsum operands a, b
// sums over 'batch' (a weight gradient): its bfloat16 result then stays
// float32 (the rule the einsum vjp applies; spmd's mesh-invariant vjp too).
bool einsum_cotangent_sums_over_batch(const Array& operand, const Array& a, const Array& b);

// matmul(x, y, contract): contracts the one named dim shared by x and y; the
// output has x's other dims then y's other dims (dims shared and not
// contracted are batch dims and appear once, in x's position).
Array matmul(const Array& x, const Array& y, const std::string& contract);
Array matmul(const Array& x, const Array& y, const std::string& contract, EinsumPrecision precision);

// ------------------------------------------------ greedy decoding's argmax
// The next tokens of greedy decoding without the whole logits product. A
// batch-1 decode step reads its f32 logits kernel ([vocab, embed], 66 MB
// for T5.1.1) once per token, bound by memory; this reads a bf16 copy of it
// instead and sums exactly only the vocabulary entries an error bound cannot
// rule out (the CPU kernel kernels::cpu::screened_argmax states the bound
// and why it holds).
//
// make_logits_screen(kernel [vocab, embed] f32) -> {screen bf16 [vocab,
// embed] (the kernel rounded to nearest even), bounds f32 [vocab,
// screen_bound=2]}: made once per parameter set (a decode layout).
// screened_dense_argmax(x [batch, embed] f32, kernel, screen): int32 [batch],
// bitwise argmax(einsum(x, kernel) over embed, "vocab") (the first maximum, a
// NaN above all), whatever the values. Over 8 rows (where the product runs on
// other kernels) it computes that product and its argmax.
// Errors: std::invalid_argument("[screened_dense_argmax] ...") for other
// dims or dtypes, or a screen of another kernel's shape; arrays split over a
// mesh are not taken (the screen is for one process's whole kernel).
struct LogitsScreen {
  Array screen;  // bf16 [vocab, embed]
  Array bounds;  // f32 [vocab, screen_bound=2]
};
LogitsScreen make_logits_screen(const Array& kernel);
Array screened_dense_argmax(const Array& x, const Array& kernel, const LogitsScreen& screen);
// screened_dense_candidates: sampling's top-k from the same screen. keep >= 1
// (else std::invalid_argument). index int32 and value f32 [batch,
// candidates]: row r's candidates (index ascending, then index -1 and value
// -inf to the longest row's count), with values bitwise those of
// einsum(x, kernel) over embed. They include every vocabulary entry whose
// value is at least the row's keep-th largest (ties included), and may
// include more; a row the screen cannot narrow (a non-finite value, keep
// over a quarter of the vocabulary) has every entry. Over 8 rows (the whole
// product, on other kernels) index is no array (not valid()) and value is
// the product, every entry of every row.
struct ScreenedCandidateArrays {
  Array index;        // int32 [batch, candidates]
  Array value;        // f32 [batch, candidates]
  int64_t vocab = 0;  // the kernel's vocab size
};
ScreenedCandidateArrays screened_dense_candidates(const Array& x, const Array& kernel, const LogitsScreen& screen,
                                                  int64_t keep);

}  // namespace t5x
