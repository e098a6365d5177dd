// Internal: contiguous, vectorised, OpenMP-parallel Adafactor updates for the
// common parameter layouts. They compute exactly the rule of adafactor.h (the
// same float32 expressions in the same order as the generic element walker
// in adafactor.cpp); only the order of the float64 sums behind the means
// differs (8-lane partial sums over runs of <= 512 elements along a row, <= 32
// rows down a column, combined in order), so the means round to the same
// float32 but where a sum straddles a rounding boundary.
//
// Work is split into chunks whose boundaries depend on the shape only, and
// partial sums are combined in chunk order, so results are bitwise the same
// on any thread count (the sharded path relies on every process computing
// the same values). Parallelism is within one parameter only: the caller
// walks parameters serially, keeping collectives in the same order.
#pragma once
#include <cstdint>

namespace t5x::optim_detail {

// Per-step float32 hyper-parameters, as adafactor.cpp derives them.
struct AdafactorScalars {
  float decay = 0, mixing = 0, eps1 = 0, eps2 = 0;
  bool has_max_parameter_scale = false;
  float max_parameter_scale = 0;
  float lr = 0;
  bool use_scale = true;         // multiply_by_parameter_scale
  bool clip = false;             // clipping_threshold set
  float clipping_threshold = 1;
  float b1 = 0, one_minus_b1 = 0;  // momentum (used when m != nullptr)
  float keep_w = 1;              // 1 - weight_decay_rate (1 when unset)
  bool skip_nan = false;
  float grad_scale = 1;          // global-norm clipping factor
};

// A factored param viewed as [nb, n_outer, n_inner] (row-major): nb = the
// product of its leading BATCH dims, then one contiguous group of ROW dims
// and one of COLUMN dims, in either order. v_row is [nb, rows], v_col
// [nb, cols].
struct FactoredLayout {
  int64_t nb = 1, n_outer = 1, n_inner = 1;
  bool row_outer = true;  // ROW dims come first (v_row indexed by the outer index)
};

void adafactor_factored_update(const FactoredLayout& l, const AdafactorScalars& s, float* param,
                               const float* grad, float* v_row, float* v_col, float* m);

// An unfactored param viewed as [nb, n]: leading BATCH dims, then the
// averaging dims. v (and m) have the param's layout.
void adafactor_unfactored_update(int64_t nb, int64_t n, const AdafactorScalars& s, float* param,
                                 const float* grad, float* v, float* m);

}  // namespace t5x::optim_detail
