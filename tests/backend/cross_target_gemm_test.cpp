// The products and the attention tiles give the same bits on every SIMD
// target the CPU supports (AVX-512, AVX2, SSE4, SSSE3, the 128-bit emulation
// on this kind of x86-64 machine): skinny_gemm (decode steps, f32 and bf16),
// small_gemm_acc (the attention tiles' register-tiled product), and attention
// forward and backward with every mask kind, on shapes whose columns, rows
// and head dims fill whole vectors of every width and shapes that leave tails.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backend/cpu/attention.h"
#include "backend/cpu/skinny_gemm.h"
#include "backend/cpu/small_gemm.h"
#include "core/dtype_bf16.h"
#include "cross_target.h"
#include "test_util.h"

namespace t5x::cpu {
namespace {

using testing::append;
using testing::Bytes;
using testing::expect_same_on_every_target;
using testing::random_vec;

std::string shape_name(int64_t m, int64_t n, int64_t k) {
  return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

// Values of mixed magnitude, so that roundings differ between sum orders.
std::vector<float> mixed(size_t n, uint32_t seed) {
  std::vector<float> x = random_vec(n, seed);
  for (size_t i = 0; i < n; i += 5) x[i] *= 1000.f;
  for (size_t i = 3; i < n; i += 7) x[i] *= 1e-3f;
  return x;
}

struct SkinnyShape {
  int64_t m, n, k;
};
// n: whole 16-lane vectors, tails, more than one 512-column block, a tail block.
const SkinnyShape kSkinnyShapes[] = {{1, 1024, 512}, {8, 2048, 64},  {1, 37, 19},   {3, 517, 33},
                                     {5, 1, 7},      {4, 1100, 130}, {7, 16, 1},    {2, 15, 5}};

template <typename T, typename TC>
Bytes run_skinny(const SkinnyShape& sh, float alpha, float beta, int64_t pad) {
  const int64_t lda = sh.k + pad, ldb = sh.n + pad, ldc = sh.n + pad;
  const auto a = mixed(size_t(sh.m * lda), 1), b = mixed(size_t(sh.k * ldb), 2), c0 = mixed(size_t(sh.m * ldc), 3);
  std::vector<T> ta(a.begin(), a.end()), tb(b.begin(), b.end());
  std::vector<TC> c(c0.begin(), c0.end());
  skinny_gemm<T, T, TC>(sh.m, sh.n, sh.k, alpha, ta.data(), lda, tb.data(), ldb, beta, c.data(), ldc);
  // And with B stored transposed (skinny_gemm_bt).
  std::vector<T> bt(size_t(sh.n * lda));
  for (int64_t p = 0; p < sh.k; ++p)
    for (int64_t j = 0; j < sh.n; ++j) bt[size_t(j * lda + p)] = tb[size_t(p * ldb + j)];
  std::vector<TC> ct(c0.begin(), c0.end());
  skinny_gemm_bt<T, T, TC>(sh.m, sh.n, sh.k, alpha, ta.data(), lda, bt.data(), lda, beta, ct.data(), ldc);
  Bytes out;
  append(out, c);
  append(out, ct);
  return out;
}

TEST(CrossTargetGemm, SkinnyF32) {
  for (const SkinnyShape& sh : kSkinnyShapes)
    for (float beta : {0.f, 0.75f})
      for (int64_t pad : {0, 3})
        expect_same_on_every_target("skinny f32 " + shape_name(sh.m, sh.n, sh.k) + " beta=" + std::to_string(beta),
                                    [&] { return run_skinny<float, float>(sh, 1.25f, beta, pad); });
}

TEST(CrossTargetGemm, SkinnyBf16) {
  for (const SkinnyShape& sh : kSkinnyShapes)
    for (float beta : {0.f, 0.75f}) {
      expect_same_on_every_target("skinny bf16->f32 " + shape_name(sh.m, sh.n, sh.k),
                                  [&] { return run_skinny<bfloat16, float>(sh, 1.25f, beta, 1); });
      expect_same_on_every_target("skinny bf16->bf16 " + shape_name(sh.m, sh.n, sh.k),
                                  [&] { return run_skinny<bfloat16, bfloat16>(sh, 1.25f, beta, 1); });
    }
}

TEST(CrossTargetGemm, SkinnySpecialValues) {
  // inf, NaN and overflow flow through the same fused steps on every target.
  const SkinnyShape sh{2, 40, 9};
  expect_same_on_every_target("skinny specials", [&] {
    auto a = mixed(size_t(sh.m * sh.k), 4), b = mixed(size_t(sh.k * sh.n), 5);
    a[1] = std::numeric_limits<float>::infinity();
    b[7] = std::numeric_limits<float>::quiet_NaN();
    b[20] = 3e38f;
    a[sh.k + 2] = 3e38f;
    std::vector<float> c(size_t(sh.m * sh.n));
    skinny_gemm<float, float, float>(sh.m, sh.n, sh.k, 1.f, a.data(), sh.k, b.data(), sh.n, 0.f, c.data(), sh.n);
    Bytes out;
    append(out, c);
    return out;
  });
}

TEST(CrossTargetGemm, SmallGemm) {
  struct S {
    int64_t m, n, k;
  };
  // The attention tiles' shapes (32 x 64 x 64, 64 x 64 x 32; a decode
  // step's 1 x 64 x 64) and ragged ones: 1 to 3 rows left over take wider
  // tiles, then narrower ones for the columns left (1 x 300: 64-column
  // tiles on AVX2, then 32, 8 and a part).
  for (const S& sh : {S{32, 64, 64}, S{64, 64, 32}, S{1, 64, 64}, S{31, 50, 64}, S{5, 13, 3}, S{1, 1, 1},
                      S{7, 100, 17}, S{4, 33, 0}, S{3, 129, 70}, S{2, 150, 9}, S{1, 300, 33}, S{6, 70, 5}})
    for (bool transposed_a : {false, true}) {
      const int64_t a_row = transposed_a ? 1 : sh.k, a_col = transposed_a ? sh.m : 1, ldb = sh.n + 2,
                    ldc = sh.n + 1;
      expect_same_on_every_target("small_gemm " + shape_name(sh.m, sh.n, sh.k) + (transposed_a ? " A^T" : ""), [&] {
        const auto a = mixed(size_t(std::max<int64_t>(1, sh.m * sh.k)), 6),
                   b = mixed(size_t(std::max<int64_t>(1, sh.k * ldb)), 7);
        auto c = mixed(size_t(sh.m * ldc), 8);
        // The contract, one element at a time: a sum over p in order with
        // fused multiply-adds from zero, then added to C.
        std::vector<float> want = c;
        for (int64_t i = 0; i < sh.m; ++i)
          for (int64_t j = 0; j < sh.n; ++j) {
            float acc = 0.f;
            for (int64_t p = 0; p < sh.k; ++p) acc = std::fma(a[size_t(i * a_row + p * a_col)], b[size_t(p * ldb + j)], acc);
            want[size_t(i * ldc + j)] += acc;
          }
        small_gemm_acc(sh.m, sh.n, sh.k, a.data(), a_row, a_col, b.data(), ldb, c.data(), ldc);
        EXPECT_EQ(0, std::memcmp(c.data(), want.data(), c.size() * sizeof(float))) << shape_name(sh.m, sh.n, sh.k);
        Bytes out;
        append(out, c);
        return out;
      });
    }
}

// Attention forward (out, lse) and backward (dq, dk, dv, dbias) on one case.
struct AttnCase {
  std::string name;
  AttentionShape s;
  bool causal = false, segments = false, masks = false;
  AttentionBiasLayout bias = AttentionBiasLayout::kNone;
  float scale = 1.f;
};

Bytes run_attention(const AttnCase& c) {
  const AttentionShape& s = c.s;
  const size_t nq = size_t(s.batch * s.q_length * s.heads * s.head_dim);
  const size_t nk = size_t(s.batch * s.kv_length * s.kv_heads * s.head_dim);
  const auto q = random_vec(nq, 11, -2.f, 2.f), k = random_vec(nk, 12, -2.f, 2.f), v = random_vec(nk, 13);
  const auto dout = random_vec(nq, 14);
  const size_t nbias = size_t((c.bias == AttentionBiasLayout::kBatchHeads ? s.batch : 1) * s.heads * s.q_length *
                              s.kv_length);
  const auto bias = random_vec(nbias, 15, -3.f, 3.f);
  std::vector<int32_t> qseg(size_t(s.batch * s.q_length)), kseg(size_t(s.batch * s.kv_length));
  for (size_t i = 0; i < qseg.size(); ++i) qseg[i] = int32_t(1 + (i % size_t(s.q_length)) * 3 / size_t(s.q_length));
  for (size_t i = 0; i < kseg.size(); ++i)
    kseg[i] = int32_t(1 + (i % size_t(s.kv_length)) * 3 / size_t(s.kv_length));
  qseg[0] = 0;  // a padding query: its row has no allowed key
  std::vector<uint8_t> qmask(qseg.size(), 1), kvmask(kseg.size(), 1);
  for (size_t i = 2; i < kvmask.size(); i += 5) kvmask[i] = 0;
  qmask[qmask.size() - 1] = 0;

  AttentionParams p;
  p.causal = c.causal;
  p.scale = c.scale;
  if (c.bias != AttentionBiasLayout::kNone) {
    p.bias = bias.data();
    p.bias_layout = c.bias;
  }
  if (c.segments) {
    p.q_segment_ids = qseg.data();
    p.kv_segment_ids = kseg.data();
  }
  if (c.masks) {
    p.q_mask = qmask.data();
    p.kv_mask = kvmask.data();
  }
  std::vector<float> out(nq), lse(size_t(s.batch * s.heads * s.q_length));
  attention_forward(s, p, q.data(), k.data(), v.data(), out.data(), lse.data());
  std::vector<float> dq(nq), dk(nk), dv(nk), dbias(p.bias ? nbias : 0);
  attention_backward(s, p, q.data(), k.data(), v.data(), out.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                     dv.data(), p.bias ? dbias.data() : nullptr);
  // Forward and backward on bf16 q, k and v (bf16 activations, a decode
  // cache), widened in the tiles.
  std::vector<bfloat16> q16(q.begin(), q.end()), k16(k.begin(), k.end()), v16(v.begin(), v.end());
  std::vector<float> out16(nq), lse16(lse.size());
  attention_forward(s, p, q16.data(), k16.data(), v16.data(), out16.data(), lse16.data());
  std::vector<float> dq16(nq), dk16(nk), dv16(nk), dbias16(dbias.size());
  attention_backward(s, p, q16.data(), k16.data(), v16.data(), out16.data(), lse16.data(), dout.data(), dq16.data(),
                     dk16.data(), dv16.data(), p.bias ? dbias16.data() : nullptr);
  Bytes r;
  for (const auto* x : {&out, &lse, &dq, &dk, &dv, &dbias, &out16, &lse16, &dq16, &dk16, &dv16, &dbias16})
    append(r, *x);
  return r;
}

TEST(CrossTargetGemm, Attention) {
  std::vector<AttnCase> cases;
  // {batch, q_length, kv_length, heads, kv_heads, head_dim}
  cases.push_back({"plain, whole tiles", {2, 64, 128, 2, 2, 64}});
  cases.push_back({"causal + heads bias", {1, 70, 70, 2, 1, 64}, true, false, false, AttentionBiasLayout::kHeads});
  cases.push_back({"tails: head_dim 20, ragged lengths, batch-heads bias",
                   {2, 33, 75, 3, 3, 20},
                   false,
                   false,
                   false,
                   AttentionBiasLayout::kBatchHeads,
                   0.125f});
  cases.push_back({"segments + masks + causal, GQA", {2, 40, 50, 4, 2, 24}, true, true, true,
                   AttentionBiasLayout::kHeads, 0.5f});
  cases.push_back({"decode step: one query", {3, 1, 37, 2, 2, 64}, false, false, true});
  cases.push_back({"head_dim 7", {1, 9, 130, 1, 1, 7}, true});
  for (const AttnCase& c : cases) expect_same_on_every_target("attention " + c.name, [&] { return run_attention(c); });
}

}  // namespace
}  // namespace t5x::cpu
