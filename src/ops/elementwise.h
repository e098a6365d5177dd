// Elementwise ops with broadcasting BY NAME.
//
// Broadcasting: operands are matched by dim name, not position. The output
// holds the dims of the first operand in its order, then the dims of the next
// operands that it lacks, in their order:
//   add(x[batch=2, length=3, embed=4], s[embed=4]) -> [batch=2, length=3, embed=4]
//   mul(a[batch=2, q=3], b[k=5])                   -> [batch=2, q=3, k=5] (outer product)
// Dims with equal names must have equal sizes (no size-1 broadcasting); a
// scalar (rank 0) broadcasts everywhere.
//
// Dtypes: binary ops need equal dtypes (cast explicitly). bf16/f16 compute in
// f32 and round back. exp, log, tanh, gelu, rsqrt, sqrt, sigmoid, div need a
// floating dtype; neg, abs, square, relu, sign, add, sub, mul, maximum,
// minimum also accept int32/int64. Comparisons return bool. The double
// overloads make a scalar of the array's dtype.
//
// Gradients: every floating op has a vjp; comparisons, logical ops and integer
// arithmetic are not differentiable. maximum/minimum split the gradient 50/50
// on ties (as jax.numpy), abs uses sign(0) = 0, relu'(0) = 0.
//
// Errors (std::invalid_argument): "[add] dim 'embed' has size 4 in x... but 3
// in y...", "[mul] dtype mismatch: x is float32[...] but y is bfloat16[...]",
// "[exp] expected a floating dtype for x, got int32[...]",
// "[where] cond must be bool, got float32[...]".
#pragma once
#include "core/array.h"

namespace t5x {

// Unary.
Array neg(const Array& x);
Array abs(const Array& x);
Array sign(const Array& x);
Array square(const Array& x);
Array exp(const Array& x);
Array log(const Array& x);
Array tanh(const Array& x);
Array sqrt(const Array& x);
Array rsqrt(const Array& x);
Array sigmoid(const Array& x);
Array relu(const Array& x);
// GELU, tanh approximation as in T5.1.1 / flax nn.gelu(approximate=True):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Hendrycks & Gimpel 2016, eq. 2.
Array gelu(const Array& x);
Array logical_not(const Array& x);  // bool -> bool

// Binary (broadcast by name).
Array add(const Array& a, const Array& b);
Array sub(const Array& a, const Array& b);
Array mul(const Array& a, const Array& b);
Array div(const Array& a, const Array& b);  // integer division truncates toward zero
Array maximum(const Array& a, const Array& b);
Array minimum(const Array& a, const Array& b);
Array add(const Array& a, double b);
// acc = acc + g (the backward's gradient sums). When acc has g's shape, dims
// order and float dtype and may be written over (its buffer's sole owner, one
// CPU device, no tape recording: detail::can_write_over), the sum goes into
// acc's buffer (no new buffer; the bits of add); else acc = add(acc, g).
void add_into(Array& acc, const Array& g);
Array sub(const Array& a, double b);
Array mul(const Array& a, double b);
Array div(const Array& a, double b);
Array maximum(const Array& a, double b);
Array minimum(const Array& a, double b);

// Comparisons -> bool (no gradient).
Array eq(const Array& a, const Array& b);
Array ne(const Array& a, const Array& b);
Array lt(const Array& a, const Array& b);
Array le(const Array& a, const Array& b);
Array gt(const Array& a, const Array& b);
Array ge(const Array& a, const Array& b);
Array eq(const Array& a, double b);
Array ne(const Array& a, double b);
Array lt(const Array& a, double b);
Array le(const Array& a, double b);
Array gt(const Array& a, double b);
Array ge(const Array& a, double b);
Array logical_and(const Array& a, const Array& b);  // bool, bool -> bool
Array logical_or(const Array& a, const Array& b);

// where(cond, x, y): x where cond else y. cond is bool; x and y share a dtype.
// Output dims: x's, then y's new ones, then cond's new ones.
Array where(const Array& cond, const Array& x, const Array& y);
Array where(const Array& cond, const Array& x, double y);
Array where(const Array& cond, double x, const Array& y);

// minimum(maximum(x, lo), hi).
Array clip(const Array& x, double lo, double hi);

// Floating x -> bool masks (no gradient).
Array isnan(const Array& x);
Array isfinite(const Array& x);

// Dtype conversion (floats round to nearest even; float -> int truncates;
// anything -> bool is x != 0). Gradient flows between floating dtypes only.
Array cast(const Array& x, DType dtype);

// Scalar of x's dtype.
Array scalar_like(const Array& x, double value);
// zeros / ones of x's shape and dtype.
Array zeros_like(const Array& x);
Array ones_like(const Array& x);

// Operator sugar for the functions above.
inline Array operator+(const Array& a, const Array& b) { return add(a, b); }
inline Array operator-(const Array& a, const Array& b) { return sub(a, b); }
inline Array operator*(const Array& a, const Array& b) { return mul(a, b); }
inline Array operator/(const Array& a, const Array& b) { return div(a, b); }
inline Array operator+(const Array& a, double b) { return add(a, b); }
inline Array operator-(const Array& a, double b) { return sub(a, b); }
inline Array operator*(const Array& a, double b) { return mul(a, b); }
inline Array operator/(const Array& a, double b) { return div(a, b); }
inline Array operator*(double a, const Array& b) { return mul(b, a); }
inline Array operator+(double a, const Array& b) { return add(b, a); }
inline Array operator-(double a, const Array& b) { return add(neg(b), a); }
inline Array operator-(const Array& a) { return neg(a); }

}  // namespace t5x
