// kernels::cpu::gemm (backend/kernels.h) on the oneDNN products of gemm.h.
#include "backend/cpu/gemm.h"
#include "backend/kernels.h"

namespace t5x::kernels::cpu {

void gemm(const GemmDims& g, DType in, DType out, const void* a, const void* b, void* c) {
  t5x::cpu::GemmShape gs;
  gs.m = g.m;
  gs.n = g.n;
  gs.k = g.k;
  gs.trans_a = g.trans_a;
  gs.trans_b = g.trans_b;
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

bool gemm_block_invariant() { return t5x::cpu::gemm_block_invariant(); }

}  // namespace t5x::kernels::cpu
