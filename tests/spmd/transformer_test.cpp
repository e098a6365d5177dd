// Forward and backward of a 2-layer Transformer-like block written with ops
// (RMSNorm decomposition, attention via einsum + softmax, ReLU MLP,
// residuals, sharding constraints on activations): sharded == single device
// on every mesh of the world size, under the four standard rule presets.
#include "backend/cpu/gemm.h"
#include "spmd_test_util.h"

namespace t5x::testing_spmd {
namespace {

constexpr int64_t B = 4, L = 2, E = 4, H = 2, K = 2, M = 4;

ParamTree init_params() {
  ParamTree p;
  uint32_t seed = 100;
  for (int l = 0; l < 2; ++l) {
    std::string pre = "layers_" + std::to_string(l) + "/";
    auto w = [&](const Shape& s, double scale) { return mul(randn(s, seed++), scale); };
    p[pre + "pre_attention_norm/scale"] = add(w(Shape{{"embed", E}}, 0.1), 1.0);
    p[pre + "attention/query"] = w(Shape{{"embed", E}, {"heads", H}, {"kv", K}}, 0.5);
    p[pre + "attention/key"] = w(Shape{{"embed", E}, {"heads", H}, {"kv", K}}, 0.5);
    p[pre + "attention/value"] = w(Shape{{"embed", E}, {"heads", H}, {"kv", K}}, 0.5);
    p[pre + "attention/out"] = w(Shape{{"heads", H}, {"kv", K}, {"embed", E}}, 0.5);
    p[pre + "pre_mlp_norm/scale"] = add(w(Shape{{"embed", E}}, 0.1), 1.0);
    p[pre + "mlp/wi"] = w(Shape{{"embed", E}, {"mlp", M}}, 0.5);
    p[pre + "mlp/wo"] = w(Shape{{"mlp", M}, {"embed", E}}, 0.5);
  }
  p["x"] = randn(Shape{{"batch", B}, {"length", L}, {"embed", E}}, 99);
  return p;
}

// The block with either the sharded ops (s) or the plain ones.
struct Ops {
  bool s;
  const LogicalAxisRules* rules;
  Array add(const Array& a, const Array& b) const { return s ? spmd::add(a, b) : t5x::add(a, b); }
  Array mul(const Array& a, const Array& b) const { return s ? spmd::mul(a, b) : t5x::mul(a, b); }
  Array un(const Array& a, const std::function<Array(const Array&)>& f) const { return s ? spmd::unary(a, f) : f(a); }
  Array mean(const Array& a, const std::vector<std::string>& d) const { return s ? spmd::mean(a, d) : t5x::mean(a, d); }
  Array einsum(const Array& a, const Array& b, const std::vector<std::string>& o) const {
    return s ? spmd::einsum(a, b, o) : t5x::einsum(a, b, o);
  }
  Array softmax(const Array& a, const std::string& d) const { return s ? spmd::softmax(a, d) : t5x::softmax(a, d); }
  Array rename(const Array& a, const std::map<std::string, std::string>& r) const {
    return s ? spmd::rename(a, r) : t5x::rename(a, r);
  }
  Array constrain(const Array& a) const { return s ? spmd::with_sharding_constraint(a, *rules) : a; }
  Array sum(const Array& a) const { return s ? spmd::sum(a) : t5x::sum(a); }
};

Array rms_norm(const Ops& o, const Array& x, const Array& scale) {
  Array var = o.mean(o.mul(x, x), {"embed"});
  Array inv = o.un(var, [](const Array& v) { return rsqrt(t5x::add(v, 1e-6)); });
  return o.mul(o.mul(x, inv), scale);
}

Array block(const Ops& o, const ParamTree& p, const Array& cot) {
  Array x = o.constrain(p.at("x"));
  for (int l = 0; l < 2; ++l) {
    std::string pre = "layers_" + std::to_string(l) + "/";
    Array h = rms_norm(o, x, p.at(pre + "pre_attention_norm/scale"));
    Array q = o.constrain(o.einsum(h, p.at(pre + "attention/query"), {"batch", "length", "heads", "kv"}));
    Array hk = o.rename(h, {{"length", "kv_length"}});
    Array k = o.einsum(hk, p.at(pre + "attention/key"), {"batch", "kv_length", "heads", "kv"});
    Array v = o.einsum(hk, p.at(pre + "attention/value"), {"batch", "kv_length", "heads", "kv"});
    Array probs = o.softmax(o.einsum(q, k, {"batch", "heads", "length", "kv_length"}), "kv_length");
    Array att = o.einsum(probs, v, {"batch", "length", "heads", "kv"});
    x = o.constrain(o.add(x, o.einsum(att, p.at(pre + "attention/out"), {"batch", "length", "embed"})));
    h = rms_norm(o, x, p.at(pre + "pre_mlp_norm/scale"));
    Array a = o.un(o.einsum(h, p.at(pre + "mlp/wi"), {"batch", "length", "mlp"}), [](const Array& t) { return relu(t); });
    x = o.constrain(o.add(x, o.einsum(a, p.at(pre + "mlp/wo"), {"batch", "length", "embed"})));
  }
  return o.sum(o.mul(x, cot));
}

TEST(SpmdTransformer, TwoLayerBlockForwardBackward) {
  const ParamTree host = init_params();
  const Array cot = randn(Shape{{"batch", B}, {"length", L}, {"embed", E}}, 98);
  Ops plain{false, nullptr};
  auto ref = value_and_grad([&](const ParamTree& p) { return block(plain, p, cot); }, host);
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    for (const auto& pr : presets()) {
      SCOPED_TRACE(mesh_name(*ctx) + " rules (" + std::to_string(pr.act) + "," + std::to_string(pr.param) + ")");
      LogicalAxisRules rules = standard_logical_axis_rules(pr.act, pr.param);
      Ops sh{true, &rules};
      ParamTree params = spmd::shard_params(host, rules);
      Array cot_s = spmd::shard(cot, spmd::param_spec(cot.shape(), rules));
      auto got = value_and_grad([&](const ParamTree& p) { return block(sh, p, cot_s); }, params);
      EXPECT_LE(rel_err(spmd::gather(got.value), ref.value), 1e-5) << got.value.item() << " vs " << ref.value.item();
      for (const auto& [k, g] : ref.grads) {
        EXPECT_EQ(got.grads.at(k).local_shape(), params.at(k).local_shape()) << k;
        EXPECT_LE(rel_err(spmd::gather(got.grads.at(k)), g), 1e-5) << "grad of " << k;
      }
    }
  }
}

// The same block with the fused ops the nn layers use (RMSNorm, causal
// dot-product attention, cross-entropy with z-loss and label smoothing), a
// token embedding looked up and reused for the logits (split vocab).
Array fused_block(bool s, const LogicalAxisRules* rules, const ParamTree& p, const Array& ids, const Array& targets) {
  auto ein = [s](const Array& a, const Array& b, const std::vector<std::string>& o) {
    return s ? spmd::einsum(a, b, o) : einsum(a, b, o);
  };
  auto norm = [s](const Array& a, const Array& sc) { return s ? spmd::rms_norm(a, sc) : rms_norm(a, sc); };
  auto plus = [s](const Array& a, const Array& b) { return s ? spmd::add(a, b) : add(a, b); };
  auto constrain = [&](const Array& a) { return s ? spmd::with_sharding_constraint(a, *rules) : a; };
  const Array& emb = p.at("token_embedder");
  Array x = constrain(s ? spmd::take(emb, ids, "vocab") : take(emb, ids, "vocab"));
  AttentionOptions opt;
  opt.causal = true;
  for (int l = 0; l < 2; ++l) {
    std::string pre = "layers_" + std::to_string(l) + "/";
    Array h = norm(x, p.at(pre + "pre_attention_norm/scale"));
    Array hk = s ? spmd::rename(h, {{"length", "kv_length"}}) : rename(h, {{"length", "kv_length"}});
    Array q = ein(h, p.at(pre + "attention/query"), {"batch", "length", "heads", "kv"});
    Array k = ein(hk, p.at(pre + "attention/key"), {"batch", "kv_length", "heads", "kv"});
    Array v = ein(hk, p.at(pre + "attention/value"), {"batch", "kv_length", "heads", "kv"});
    Array att = s ? spmd::dot_product_attention(q, k, v, opt) : dot_product_attention(q, k, v, opt);
    x = constrain(plus(x, ein(att, p.at(pre + "attention/out"), {"batch", "length", "embed"})));
    h = norm(x, p.at(pre + "pre_mlp_norm/scale"));
    Array a = ein(h, p.at(pre + "mlp/wi"), {"batch", "length", "mlp"});
    a = s ? spmd::unary(a, [](const Array& t) { return relu(t); }) : relu(a);
    x = constrain(plus(x, ein(a, p.at(pre + "mlp/wo"), {"batch", "length", "embed"})));
  }
  Array logits = ein(norm(x, p.at("final_norm/scale")), emb, {"batch", "length", "vocab"});
  CrossEntropy ce = s ? spmd::softmax_cross_entropy_with_integer_labels(logits, targets, 1e-4, 0.1)
                      : softmax_cross_entropy_with_integer_labels(logits, targets, 1e-4, 0.1);
  return s ? spmd::sum(ce.loss) : sum(ce.loss);
}

TEST(SpmdTransformer, FusedBlockWithEmbeddingAndLoss) {
  ParamTree host = init_params();
  host.erase("x");
  host["token_embedder"] = randn(Shape{{"vocab", 8}, {"embed", E}}, 97);
  host["final_norm/scale"] = add(mul(randn(Shape{{"embed", E}}, 96), 0.1), 1.0);
  std::vector<int64_t> iv, tv;
  for (int i = 0; i < B * L; ++i) {
    iv.push_back((i * 3 + 1) % 8);
    tv.push_back((i * 5 + 2) % 8);
  }
  Array ids = Array::from_ints(Shape{{"batch", B}, {"length", L}}, iv), targets = Array::from_ints(Shape{{"batch", B}, {"length", L}}, tv);
  auto ref = value_and_grad([&](const ParamTree& p) { return fused_block(false, nullptr, p, ids, targets); }, host);
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    for (const auto& pr : presets()) {
      SCOPED_TRACE(mesh_name(*ctx) + " rules (" + std::to_string(pr.act) + "," + std::to_string(pr.param) + ")");
      LogicalAxisRules rules = standard_logical_axis_rules(pr.act, pr.param);
      ParamTree params = spmd::shard_params(host, rules);
      Array ids_s = spmd::shard(ids, spmd::param_spec(ids.shape(), rules));
      Array tg_s = spmd::shard(targets, spmd::param_spec(targets.shape(), rules));
      auto got = spmd::value_and_grad([&](const ParamTree& p) { return fused_block(true, &rules, p, ids_s, tg_s); }, params);
      EXPECT_LE(rel_err(spmd::gather(got.value), ref.value), 1e-5) << got.value.item() << " vs " << ref.value.item();
      for (const auto& [k, g] : ref.grads) {
        EXPECT_EQ(got.grads.at(k).local_shape(), params.at(k).local_shape()) << k;
        EXPECT_LE(rel_err(spmd::gather(got.grads.at(k)), g), 1e-5) << "grad of " << k;
      }
    }
  }
}


// Mesh-invariant lowering (spmd::Context::mesh_invariant): no sum is split
// across devices and einsum gradients are planned as einsums, so the fused
// block's loss and every gradient are bitwise one process's, on every mesh
// and rule preset (including the batch split over 'data'), in float32 and in
// bfloat16; where the GEMM's products are block-invariant (backend/cpu/gemm.h:
// oneDNN's AVX-512 ones, not its AVX2 ones; there, equal to rounding).
TEST(SpmdTransformer, MeshInvariantIsBitwiseOneProcess) {
  for (DType dt : {DType::f32, DType::bf16}) {
    ParamTree host = init_params();
    host.erase("x");
    host["token_embedder"] = randn(Shape{{"vocab", 8}, {"embed", E}}, 97);
    host["final_norm/scale"] = add(mul(randn(Shape{{"embed", E}}, 96), 0.1), 1.0);
    for (auto& [k, v] : host) v = cast(v, dt);
    std::vector<int64_t> iv, tv;
    for (int i = 0; i < B * L; ++i) {
      iv.push_back((i * 3 + 1) % 8);
      tv.push_back((i * 5 + 2) % 8);
    }
    Array ids = Array::from_ints(Shape{{"batch", B}, {"length", L}}, iv);
    Array targets = Array::from_ints(Shape{{"batch", B}, {"length", L}}, tv);
    auto ref = value_and_grad([&](const ParamTree& p) { return fused_block(false, nullptr, p, ids, targets); }, host);
    for (const auto& ctx : contexts()) {
      spmd::ContextScope scope(ctx);
      ctx->set_mesh_invariant(true);
      for (const auto& pr : presets()) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + mesh_name(*ctx) + " rules (" + std::to_string(pr.act) +
                     "," + std::to_string(pr.param) + ")");
        LogicalAxisRules rules = standard_logical_axis_rules(pr.act, pr.param);
        ParamTree params = spmd::shard_params(host, rules);
        Array ids_s = spmd::shard(ids, spmd::param_spec(ids.shape(), rules));
        Array tg_s = spmd::shard(targets, spmd::param_spec(targets.shape(), rules));
        auto got =
            spmd::value_and_grad([&](const ParamTree& p) { return fused_block(true, &rules, p, ids_s, tg_s); }, params);
        for (const auto& [k, g] : ref.grads) {
          EXPECT_EQ(got.grads.at(k).local_shape(), params.at(k).local_shape()) << k;
          EXPECT_EQ(got.grads.at(k).dtype(), g.dtype()) << k;
        }
        if (cpu::gemm_block_invariant()) {
          EXPECT_EQ(spmd::gather(got.value).to_floats(), ref.value.to_floats());
          for (const auto& [k, g] : ref.grads)
            EXPECT_EQ(spmd::gather(got.grads.at(k)).to_floats(), g.to_floats()) << "grad of " << k;
        } else {
          // The GEMM orders a block's sums by the block's shape (AVX2): equal
          // to one process to rounding (bf16: a few ulps of 2^-8).
          const double tol = dt == DType::f32 ? 1e-5 : 5e-2;
          EXPECT_LE(rel_err(spmd::gather(got.value), ref.value), tol);
          for (const auto& [k, g] : ref.grads)
            EXPECT_LE(rel_err(spmd::gather(got.grads.at(k)), g), tol) << "grad of " << k;
        }
      }
      ctx->set_mesh_invariant(false);
    }
  }
}

}  // namespace
}  // namespace t5x::testing_spmd
