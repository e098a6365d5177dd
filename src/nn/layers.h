// Token embedding, dense projections, RMSNorm and the T5 MLP block
// (t5x examples/t5/layers.py Embed, DenseGeneral, LayerNorm, MlpBlock; t5x.md 4).
//
// Parameters (logical axis names as dim names, float32):
//   embedding [vocab, embed]          normal(stddev 1.0)
//   <norm>/scale [embed]              ones
//   mlp wi/kernel or wi_0.., wi_1../kernel [embed, mlp], wo/kernel [mlp, embed]
//                                     variance_scaling(1, fan_in, truncated_normal)
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/array.h"
#include "nn/dropout.h"
#include "nn/params.h"

namespace t5x::nn {

ParamSpec embedding_param_spec(const std::string& name, int64_t vocab, int64_t embed);
ParamSpec norm_param_spec(const std::string& name, int64_t embed);
// Kernel [in_name=in, out_name=out] with t5x's default DenseGeneral init.
ParamSpec dense_param_spec(const std::string& name, const Dim& in, const Dim& out);

// embedding [vocab, embed], tokens int [...] -> [..., embed] in dtype `dt`
// (a gather; t5x's one-hot matmul gives the same values).
Array embed_lookup(const Array& embedding, const Array& tokens, DType dt);
// x [..., embed] . embedding^T -> [..., vocab] in float32 (tied logits).
Array embed_attend(const Array& embedding, const Array& x);
// x [..., in] . kernel [in, out] -> [..., out], in x's dtype.
Array dense(const Array& x, const Array& kernel, const std::string& in_dim);

// RMSNorm over "embed" (f32 inside, eps 1e-6), result in x's dtype.
Array layer_norm(const ParamTree& p, const std::string& name, const Array& x);

// A decode layout for gated MLPs (two activations, wi_0 and wi_1 of the same
// [embed, mlp] shape and dtype): the two kernels stacked as prefix/wi_fused/
// kernel [embed, mlp_branch=2, mlp] in place of wi_0 and wi_1, so that a
// decode step reads them as one stream, in one product. Each output is the
// same sum as before, so mlp_block gives the same bits (on the packed and
// few-row kernels; oneDNN's are not block-invariant). Other params are kept
// as they are (the same buffers); idempotent. Measured with B cold
// (t5x_gemm_bench --cold, AVX2, 2 threads, bf16 [512, 1024] kernels): one
// row 106-116 us fused against 2 x 75-78 us; 8 rows 239-277 against
// 2 x 131-167 us (docs/performance.md, session 55).
inline constexpr std::string_view kFusedWiName = "wi_fused", kFusedWiBranch = "mlp_branch";
ParamTree fuse_gated_wi(const ParamTree& p);

// activations: e.g. {"gelu", "linear"} (T5.1.1 gated GELU) or {"relu"} (T5.1.0);
// each of "gelu" (tanh approximation), "relu", "silu", "linear".
ParamSpecs mlp_param_specs(const std::string& prefix, int64_t embed, int64_t mlp_dim,
                           const std::vector<std::string>& activations);
// wo( prod_i act_i(x . wi_i) ) with dropout (broadcast over length) after the
// product. x [batch, length, embed] -> same dims. With prefix/wi_fused/kernel
// (fuse_gated_wi) in p, the gated GELU MLP's two input products run as one.
Array mlp_block(const ParamTree& p, const std::string& prefix, const Array& x,
                const std::vector<std::string>& activations, Dropout& dropout);

}  // namespace t5x::nn
