// Fused ops: kernel path vs plain-op decomposition (values and gradients),
// decompositions vs naive loops, finite differences, misuse.
#include <cmath>

#include "harness.h"

namespace t5x {
namespace {
using namespace testing;

// Gradients of sum(f(inputs) * w) for both implementations must agree.
void expect_same_vjp(const std::function<Array(const std::vector<Array>&)>& fused,
                     const std::function<Array(const std::vector<Array>&)>& ref, const std::vector<Array>& inputs,
                     double tol = 1e-4) {
  Array w = rand_array(ref(inputs).shape(), 77, 0.5, 1.5);
  auto wrap = [](auto f) { return [f](const std::vector<Array>& x) { return std::vector<Array>{f(x)}; }; };
  auto [of, gf] = vjp(wrap(fused), inputs, {w});
  auto [orf, gr] = vjp(wrap(ref), inputs, {w});
  expect_close(of[0], orf[0], tol);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_floating(inputs[i].dtype())) continue;
    SCOPED_TRACE("input " + std::to_string(i));
    expect_close(gf[i], gr[i], tol);
  }
}

TEST(Fused, RmsNormMatchesT5FormulaAndDecomposition) {
  Array x = rand_array(Shape{{"batch", 2}, {"length", 3}, {"embed", 8}}, 1, -2, 2);
  Array s = rand_array(Shape{{"embed", 8}}, 2, 0.5, 1.5);
  Array y = rms_norm(x, s);
  for_each_index(x.shape(), [&](const auto& i) {
    double ms = 0;
    for (int64_t e = 0; e < 8; ++e) {
      auto j = i;
      j["embed"] = e;
      ms += double(at(x, j)) * at(x, j);
    }
    double want = at(x, i) / std::sqrt(ms / 8 + 1e-6) * at(s, {{"embed", i.at("embed")}});
    EXPECT_NEAR(at(y, i), want, 1e-5);
  });
  expect_same_vjp([](const auto& v) { return rms_norm(v[0], v[1]); },
                  [](const auto& v) { return rms_norm_reference(v[0], v[1]); }, {x, s});
  check_grad([](const auto& v) { return rms_norm(v[0], v[1]); }, {x, s});
  // Normalising over a dim that is not last.
  Array xt = transpose(x, {"embed", "batch", "length"});
  expect_close(rms_norm(xt, s), transpose(y, {"embed", "batch", "length"}), 1e-6);
  Array yb = rms_norm(cast(x, DType::bf16), s);
  EXPECT_EQ(yb.dtype(), DType::bf16);
  EXPECT_LT(max_abs_diff(cast(yb, DType::f32), y), 0.05);
  expect_invalid([&] { rms_norm(x, rand_array(Shape{{"embed", 4}}, 3)); }, {"[rms_norm]", "scale", "embed=8"});
  expect_invalid([&] { rms_norm(x, s, "mlp"); }, {"[rms_norm]", "'mlp'"});
}

// Naive T5 attention for one configuration (f64).
Array naive_attention(const Array& q, const Array& k, const Array& v, const Array& bias, bool causal,
                      const std::vector<int>& qseg, const std::vector<int>& kseg) {
  const int64_t B = q.dim("batch"), L = q.dim("length"), H = q.dim("heads"), D = q.dim("kv"), KL = k.dim("kv_length");
  std::vector<float> out(size_t(B * L * H * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> lg(static_cast<size_t>(KL));
        double m = -1e300;
        for (int64_t j = 0; j < KL; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += double(at(q, {{"batch", b}, {"length", i}, {"heads", h}, {"kv", d}})) *
                 at(k, {{"batch", b}, {"kv_length", j}, {"heads", h}, {"kv", d}});
          bool ok = !causal || j <= i + (KL - L);
          if (!qseg.empty()) ok = ok && qseg[size_t(b * L + i)] == kseg[size_t(b * KL + j)] && qseg[size_t(b * L + i)] != 0;
          // In f32 as t5x: -1e10 swamps the logit, so a fully masked row is uniform.
          float tb = ok ? 0.f : -1e10f;
          if (bias.valid()) tb += at(bias, {{"heads", h}, {"length", i}, {"kv_length", j}});
          s = double(float(s) + tb);
          lg[size_t(j)] = s;
          m = std::max(m, s);
        }
        double z = 0;
        for (double& x : lg) z += (x = std::exp(x - m));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < KL; ++j) acc += lg[size_t(j)] / z * at(v, {{"batch", b}, {"kv_length", j}, {"heads", h}, {"kv", d}});
          out[size_t(((b * L + i) * H + h) * D + d)] = float(acc);
        }
      }
  return Array::from_floats(q.shape(), out);
}

TEST(Fused, AttentionMatchesNaiveAndDecomposition) {
  const Shape qs{{"batch", 2}, {"length", 5}, {"heads", 2}, {"kv", 3}};
  const Shape ks{{"batch", 2}, {"kv_length", 5}, {"heads", 2}, {"kv", 3}};
  Array q = rand_array(qs, 1), k = rand_array(ks, 2), v = rand_array(ks, 3);
  Array bias = rand_array(Shape{{"heads", 2}, {"length", 5}, {"kv_length", 5}}, 4);
  std::vector<int> qseg = {1, 1, 2, 2, 0, 1, 1, 1, 2, 2};
  Array seg = Array::from_ints(Shape{{"batch", 2}, {"length", 5}}, std::vector<int64_t>(qseg.begin(), qseg.end()));
  for (int cfg = 0; cfg < 4; ++cfg) {
    SCOPED_TRACE("config " + std::to_string(cfg));
    AttentionOptions o;
    bool causal = cfg & 1, segs = cfg & 2;
    o.causal = causal;
    o.bias = bias;
    if (segs) {
      o.q_segment_ids = seg;
      o.kv_segment_ids = seg;
    }
    Array want = naive_attention(q, k, v, bias, causal, segs ? qseg : std::vector<int>{}, segs ? qseg : std::vector<int>{});
    expect_close(dot_product_attention_reference(q, k, v, o), want, 1e-5);
    expect_close(dot_product_attention(q, k, v, o), want, 1e-5);
    expect_same_vjp(
        [&](const auto& a) { AttentionOptions p = o; p.bias = a[3]; return dot_product_attention(a[0], a[1], a[2], p); },
        [&](const auto& a) { AttentionOptions p = o; p.bias = a[3]; return dot_product_attention_reference(a[0], a[1], a[2], p); },
        {q, k, v, bias});
  }
  // No scaling unless asked: scale = 1/sqrt(kv) equals pre-scaling q.
  AttentionOptions sc;
  sc.scale = 1 / std::sqrt(3.0);
  expect_close(dot_product_attention(q, k, v, sc), dot_product_attention(mul(q, sc.scale), k, v), 1e-5);
  // k and v may use `length`; other dim orders give the same result.
  Array kl = rename(k, {{"kv_length", "length"}});
  expect_close(dot_product_attention(transpose(q, {"heads", "batch", "kv", "length"}), kl, rename(v, {{"kv_length", "length"}})),
               transpose(dot_product_attention(q, k, v), {"heads", "batch", "kv", "length"}), 1e-6);
  check_grad([&](const auto& a) { AttentionOptions p; p.causal = true; return dot_product_attention(a[0], a[1], a[2], p); },
             {q, k, v});
}

TEST(Fused, AttentionPaddingMasksAndCrossAttention) {
  const Shape qs{{"batch", 1}, {"length", 3}, {"heads", 1}, {"kv", 2}};
  const Shape ks{{"batch", 1}, {"kv_length", 4}, {"heads", 1}, {"kv", 2}};
  Array q = rand_array(qs, 5), k = rand_array(ks, 6), v = rand_array(ks, 7);
  AttentionOptions o;
  o.kv_mask = Array::from_vector<bool>(Shape{{"batch", 1}, {"kv_length", 4}}, {true, true, false, true});
  Array a = dot_product_attention(q, k, v, o);
  Array r = dot_product_attention_reference(q, k, v, o);
  expect_close(a, r, 1e-5);
  // Same as dropping the masked key.
  Array keep = Array::from_vector<int32_t>(Shape{{"kv_length", 3}}, {0, 1, 3});
  Array k3 = rename(take(k, keep, "kv_length"), {}), v3 = take(v, keep, "kv_length");
  expect_close(a, dot_product_attention(q, transpose(k3, {"batch", "kv_length", "heads", "kv"}),
                                        transpose(v3, {"batch", "kv_length", "heads", "kv"})), 1e-5);
  expect_invalid([&] { dot_product_attention(q, rand_array(Shape{{"batch", 1}, {"kv_length", 4}, {"heads", 2}, {"kv", 2}}, 1), v); },
                 {"[dot_product_attention]", "'heads'"});
  expect_invalid([&] { dot_product_attention(q, k, cast(v, DType::bf16)); }, {"[dot_product_attention]", "bfloat16"});
  AttentionOptions bad;
  bad.q_segment_ids = Array::zeros(Shape{{"batch", 1}, {"length", 3}}, DType::i32);
  expect_invalid([&] { dot_product_attention(q, k, v, bad); }, {"[dot_product_attention]", "together"});
}

TEST(Fused, SwitchRoutesToTheDecomposition) {
  Array x = rand_array(Shape{{"batch", 2}, {"embed", 8}}, 41), s = rand_array(Shape{{"embed", 8}}, 42);
  Array h1 = rand_array(Shape{{"batch", 2}, {"embed", 8}}, 43);
  ASSERT_TRUE(fused_kernels_enabled());
  Array fused = rms_norm(x, s), fg = gated_gelu(x, h1);
  set_fused_kernels_enabled(false);
  Array plain = rms_norm(x, s), pg = gated_gelu(x, h1);
  set_fused_kernels_enabled(true);
  EXPECT_TRUE(array_equal(plain, rms_norm_reference(x, s)));
  EXPECT_TRUE(array_equal(pg, gated_gelu_reference(x, h1)));
  expect_close(fused, plain, 1e-5);
  expect_close(fg, pg, 1e-5);
}

TEST(Fused, GroupedQueryAttention) {
  const Shape qs{{"batch", 2}, {"length", 4}, {"heads", 4}, {"kv", 3}};
  const Shape ks{{"batch", 2}, {"kv_length", 5}, {"kv_heads", 2}, {"kv", 3}};
  Array q = rand_array(qs, 21), k = rand_array(ks, 22), v = rand_array(ks, 23);
  // Explicitly repeated kv heads: query head h reads kv head h / 2.
  auto expand = [](const Array& x) {
    Array idx = Array::from_vector<int32_t>(Shape{{"heads", 4}}, {0, 0, 1, 1});
    return transpose(take(x, idx, "kv_heads"), {"batch", "kv_length", "heads", "kv"});
  };
  AttentionOptions o;
  o.causal = true;
  Array want = dot_product_attention(q, expand(k), expand(v), o);
  expect_close(dot_product_attention(q, k, v, o), want, 1e-5);
  expect_close(dot_product_attention_reference(q, k, v, o), want, 1e-5);
  expect_same_vjp([&](const auto& a) { return dot_product_attention(a[0], a[1], a[2], o); },
                  [&](const auto& a) { return dot_product_attention_reference(a[0], a[1], a[2], o); }, {q, k, v});
  expect_invalid([&] { dot_product_attention(q, rand_array(Shape{{"batch", 2}, {"kv_length", 5}, {"kv_heads", 3}, {"kv", 3}}, 1),
                                             rand_array(Shape{{"batch", 2}, {"kv_length", 5}, {"kv_heads", 3}, {"kv", 3}}, 2)); },
                 {"[dot_product_attention]", "'kv_heads' = 3", "divide"});
}

TEST(Fused, CrossEntropyMatchesT5xFormula) {
  const Shape ls{{"batch", 2}, {"length", 3}, {"vocab", 7}};
  Array logits = rand_array(ls, 8, -3, 3);
  Array targets = Array::from_vector<int32_t>(Shape{{"length", 3}, {"batch", 2}}, {0, 6, 3, 3, 5, 1});
  for (double z : {0.0, 1e-4, 0.1})
    for (double lsm : {0.0, 0.1}) {
      SCOPED_TRACE("z_loss " + std::to_string(z) + " label_smoothing " + std::to_string(lsm));
      CrossEntropy f = softmax_cross_entropy_with_integer_labels(logits, targets, z, lsm);
      CrossEntropy r = softmax_cross_entropy_with_integer_labels_reference(logits, targets, z, lsm);
      ASSERT_EQ(f.loss.shape(), (Shape{{"batch", 2}, {"length", 3}}));
      expect_close(f.loss, r.loss, 1e-5);
      expect_close(f.z_loss, r.z_loss, 1e-5);
      // Naive formula.
      const double V = 7, c = 1 - lsm, o = lsm / (V - 1), norm = -(c * std::log(c) + (V - 1) * o * std::log(o + 1e-20));
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t l = 0; l < 3; ++l) {
          double m = -1e300, s = 0;
          for (int64_t j = 0; j < 7; ++j) m = std::max(m, double(at(logits, {{"batch", b}, {"length", l}, {"vocab", j}})));
          for (int64_t j = 0; j < 7; ++j) s += std::exp(at(logits, {{"batch", b}, {"length", l}, {"vocab", j}}) - m);
          double lse = m + std::log(s), xent = 0;
          int64_t t = int64_t(at(targets, {{"length", l}, {"batch", b}}));
          for (int64_t j = 0; j < 7; ++j)
            xent -= (j == t ? c : o) * (at(logits, {{"batch", b}, {"length", l}, {"vocab", j}}) - lse);
          EXPECT_NEAR(at(f.loss, {{"batch", b}, {"length", l}}), xent - norm + z * lse * lse, 1e-5);
          EXPECT_NEAR(at(f.z_loss, {{"batch", b}, {"length", l}}), z * lse * lse, 1e-6);
        }
      expect_same_vjp([&](const auto& a) { return softmax_cross_entropy_with_integer_labels(a[0], targets, z, lsm).loss; },
                      [&](const auto& a) { return softmax_cross_entropy_with_integer_labels_reference(a[0], targets, z, lsm).loss; },
                      {logits});
      check_grad([&](const auto& a) { return softmax_cross_entropy_with_integer_labels(a[0], targets, z, lsm).loss; }, {logits});
    }
  expect_invalid([&] { softmax_cross_entropy_with_integer_labels(logits, cast(targets, DType::f32)); },
                 {"softmax_cross_entropy", "int32/int64", "float32"});
  expect_invalid([&] { softmax_cross_entropy_with_integer_labels(logits, add(targets, Array::scalar(4, DType::i32))); },
                 {"softmax_cross_entropy", "target 7", "'vocab'"});
  expect_invalid([&] { softmax_cross_entropy_with_integer_labels(logits, Array::zeros(Shape{{"batch", 2}}, DType::i32)); },
                 {"softmax_cross_entropy", "without 'vocab'"});
}

TEST(Fused, GatedGeluAndMlp) {
  Array h0 = rand_array(Shape{{"batch", 2}, {"length", 3}, {"mlp", 5}}, 9, -3, 3);
  Array h1 = rand_array(Shape{{"mlp", 5}, {"batch", 2}, {"length", 3}}, 10);
  Array g = gated_gelu(h0, h1);
  for_each_index(h0.shape(), [&](const auto& i) {
    double x = at(h0, i);
    double ge = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(at(g, i), ge * at(h1, i), 1e-5);
  });
  expect_same_vjp([](const auto& a) { return gated_gelu(a[0], a[1]); },
                  [](const auto& a) { return gated_gelu_reference(a[0], a[1]); }, {h0, h1});
  Array x = rand_array(Shape{{"batch", 2}, {"embed", 4}}, 11);
  Array wi0 = rand_array(Shape{{"embed", 4}, {"mlp", 6}}, 12), wi1 = rand_array(Shape{{"embed", 4}, {"mlp", 6}}, 13);
  Array wo = rand_array(Shape{{"mlp", 6}, {"embed", 4}}, 14);
  Array y = gated_gelu_mlp(x, wi0, wi1, wo);
  EXPECT_EQ(y.shape(), x.shape());
  expect_close(y, einsum(mul(gelu(einsum(x, wi0, {"batch", "mlp"})), einsum(x, wi1, {"batch", "mlp"})), wo, {"batch", "embed"}), 1e-5);
  check_grad([](const auto& a) { return gated_gelu_mlp(a[0], a[1], a[2], a[3]); }, {x, wi0, wi1, wo});
  expect_invalid([&] { gated_gelu(h0, rand_array(Shape{{"batch", 2}, {"length", 3}, {"mlp", 4}}, 1)); }, {"[gated_gelu]", "'mlp'"});
}

}  // namespace
}  // namespace t5x
