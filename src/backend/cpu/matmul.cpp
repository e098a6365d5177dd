// kernels::cpu::gemm (backend/kernels.h) on the oneDNN products of gemm.h.
#include "backend/cpu/gemm.h"
#include "backend/kernels.h"

#include <cstring>

namespace t5x::kernels::cpu {
namespace {
t5x::cpu::GemmShape shape_of(const GemmDims& g) {
  t5x::cpu::GemmShape gs;
  gs.m = g.m;
  gs.n = g.n;
  gs.k = g.k;
  gs.trans_a = g.trans_a;
  gs.trans_b = g.trans_b;
  return gs;
}
}  // namespace

void gemm(const GemmDims& g, DType in, DType out, const void* a, const void* b, void* c) {
  const t5x::cpu::GemmShape gs = shape_of(g);
  const int64_t sa = g.m * g.k, sb = g.k * g.n, sc = g.m * g.n;
  if (in == DType::bf16 && out == DType::bf16)
    t5x::cpu::gemm_batched_bf16_out_bf16(gs, g.batch, sa, sb, sc, 1.0f, static_cast<const bfloat16*>(a),
                                         static_cast<const bfloat16*>(b), 0.0f, static_cast<bfloat16*>(c));
  else if (in == DType::bf16)
    t5x::cpu::gemm_batched_bf16(gs, g.batch, sa, sb, sc, 1.0f, static_cast<const bfloat16*>(a),
                                static_cast<const bfloat16*>(b), 0.0f, static_cast<float*>(c));
  else
    t5x::cpu::gemm_batched_f32(gs, g.batch, sa, sb, sc, 1.0f, static_cast<const float*>(a),
                               static_cast<const float*>(b), 0.0f, static_cast<float*>(c));
}

void gemm_as_bf16(const GemmDims& g, DType a_dtype, DType b_dtype, DType out, const void* a, const void* b, void* c) {
  t5x::cpu::gemm_batched_as_bf16(shape_of(g), g.batch, g.m * g.k, g.k * g.n, g.m * g.n, 1.0f, a, a_dtype == DType::f32, b,
                                 b_dtype == DType::f32, 0.0f, c, out == DType::bf16);
}

bool gemm_as_bf16_rounds_in_packing() { return std::strcmp(t5x::cpu::gemm_kernel(true), "packed") == 0; }

bool gemm_block_invariant() { return t5x::cpu::gemm_block_invariant(); }

}  // namespace t5x::kernels::cpu
