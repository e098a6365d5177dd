// The fused kernels of kernels::cpu (backend/kernels.h): dtype dispatch and
// descriptor conversion in front of the Highway kernels of rms_norm.cpp,
// gated_gelu.cpp, cross_entropy.cpp and attention.cpp.
#include <stdexcept>
#include <string>

#include "backend/cpu/attention.h"
#include "backend/cpu/cross_entropy.h"
#include "backend/cpu/gated_gelu.h"
#include "backend/cpu/rms_norm.h"
#include "backend/kernels.h"

namespace t5x::kernels::cpu {

void rms_norm_forward(DType dtype, int64_t rows, int64_t embed, const void* x, const float* scale, float eps, void* y,
                      float* rstd) {
  if (dtype == DType::bf16)
    t5x::cpu::rms_norm_forward_bf16(rows, embed, static_cast<const bfloat16*>(x), scale, eps, static_cast<bfloat16*>(y),
                                    rstd);
  else
    t5x::cpu::rms_norm_forward(rows, embed, static_cast<const float*>(x), scale, eps, static_cast<float*>(y), rstd);
}

void rms_norm_backward(DType dtype, int64_t rows, int64_t embed, const void* x, const float* scale, const float* rstd,
                       const void* dy, float eps, void* dx, float* dscale) {
  if (dtype == DType::bf16)
    t5x::cpu::rms_norm_backward_bf16(rows, embed, static_cast<const bfloat16*>(x), scale, rstd,
                                     static_cast<const bfloat16*>(dy), eps, static_cast<bfloat16*>(dx), dscale);
  else
    t5x::cpu::rms_norm_backward(rows, embed, static_cast<const float*>(x), scale, rstd, static_cast<const float*>(dy),
                                eps, static_cast<float*>(dx), dscale);
}

void gated_gelu_forward(DType dtype, int64_t n, const void* h0, const void* h1, void* out) {
  if (dtype == DType::bf16)
    t5x::cpu::gated_gelu_forward_bf16(n, static_cast<const bfloat16*>(h0), static_cast<const bfloat16*>(h1),
                                      static_cast<bfloat16*>(out));
  else
    t5x::cpu::gated_gelu_forward(n, static_cast<const float*>(h0), static_cast<const float*>(h1),
                                 static_cast<float*>(out));
}

void gated_gelu_backward(DType dtype, int64_t n, const void* h0, const void* h1, const void* dout, void* dh0,
                         void* dh1) {
  if (dtype == DType::bf16)
    t5x::cpu::gated_gelu_backward_bf16(n, static_cast<const bfloat16*>(h0), static_cast<const bfloat16*>(h1),
                                       static_cast<const bfloat16*>(dout), static_cast<bfloat16*>(dh0),
                                       static_cast<bfloat16*>(dh1));
  else
    t5x::cpu::gated_gelu_backward(n, static_cast<const float*>(h0), static_cast<const float*>(h1),
                                  static_cast<const float*>(dout), static_cast<float*>(dh0),
                                  static_cast<float*>(dh1));
}

namespace {
t5x::cpu::CrossEntropyOptions xent_options(float z_loss, float label_smoothing) {
  t5x::cpu::CrossEntropyOptions o;
  o.z_loss = z_loss;
  o.label_smoothing = label_smoothing;
  return o;
}
}  // namespace

void cross_entropy_forward(int64_t rows, int64_t vocab, const float* logits, const int32_t* targets, float z_loss,
                           float label_smoothing, float* loss, float* z_loss_out, float* lse_out) {
  t5x::cpu::cross_entropy_forward(rows, vocab, logits, targets, xent_options(z_loss, label_smoothing), loss,
                                  z_loss_out, lse_out);
}

void cross_entropy_backward(int64_t rows, int64_t vocab, const float* logits, const int32_t* targets,
                            const float* lse, const float* dloss, float z_loss, float label_smoothing,
                            float* dlogits) {
  t5x::cpu::cross_entropy_backward(rows, vocab, logits, targets, lse, dloss, xent_options(z_loss, label_smoothing),
                                   dlogits);
}

void attention_forward(const AttentionDims& s, const AttentionArgs& p, DType q_dtype, const void* q, DType kv_dtype,
                       const void* k, const void* v, float* out, float* lse, float* logl) {
  if (q_dtype == DType::f32 && kv_dtype == DType::f32)
    return t5x::cpu::attention_forward(s, p, static_cast<const float*>(q), static_cast<const float*>(k),
                                       static_cast<const float*>(v), out, lse, logl);
  if (q_dtype == DType::bf16 && kv_dtype == DType::bf16)
    return t5x::cpu::attention_forward(s, p, static_cast<const bfloat16*>(q), static_cast<const bfloat16*>(k),
                                       static_cast<const bfloat16*>(v), out, lse, logl);
  throw std::invalid_argument(std::string("[attention] q, k and v must be all float32 or all bfloat16; got q ") +
                              dtype_name(q_dtype) + ", k / v " + dtype_name(kv_dtype));
}

void attention_backward(const AttentionDims& s, const AttentionArgs& p, DType qkv_dtype, const void* q, const void* k,
                        const void* v, const float* out, const float* lse, const float* logl, const float* dout,
                        float* dq, float* dk, float* dv, float* dbias) {
  switch (qkv_dtype) {
    case DType::f32:
      return t5x::cpu::attention_backward(s, p, static_cast<const float*>(q), static_cast<const float*>(k),
                                          static_cast<const float*>(v), out, lse, dout, dq, dk, dv, dbias, logl);
    case DType::bf16:
      return t5x::cpu::attention_backward(s, p, static_cast<const bfloat16*>(q), static_cast<const bfloat16*>(k),
                                          static_cast<const bfloat16*>(v), out, lse, dout, dq, dk, dv, dbias, logl);
    default:
      throw std::invalid_argument(std::string("[attention] backward q / k / v must be float32 or bfloat16, got ") +
                                  dtype_name(qkv_dtype));
  }
}

}  // namespace t5x::kernels::cpu
