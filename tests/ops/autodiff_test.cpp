// Autodiff: value_and_grad over a param tree, stop_gradient, microbatch
// accumulation, activation release during backward, buffer reuse across
// steps, remat equality.
#include "core/allocator.h"
#include "harness.h"
#include "ops/fused.h"
#include "ops/primitive.h"

namespace t5x {
namespace {
using namespace testing;

// Two-layer MLP loss written with named dims.
Array mlp_loss(const ParamTree& p, const Array& x) {
  Array h = gelu(einsum(x, p.at("layers_0/wi/kernel"), {"batch", "mlp"}));
  Array y = einsum(h, p.at("layers_0/wo/kernel"), {"batch", "embed"});
  return mean(square(mul(y, p.at("scale"))));
}

ParamTree make_params() {
  return {{"layers_0/wi/kernel", rand_array(Shape{{"embed", 4}, {"mlp", 6}}, 1)},
          {"layers_0/wo/kernel", rand_array(Shape{{"mlp", 6}, {"embed", 4}}, 2)},
          {"scale", rand_array(Shape{{"embed", 4}}, 3, 0.5, 1.5)},
          {"step", Array::scalar(3, DType::i32)}};
}

TEST(Autodiff, ValueAndGradMatchesFiniteDifferences) {
  ParamTree p = make_params();
  Array x = rand_array(Shape{{"batch", 3}, {"embed", 4}}, 4);
  ValueAndGrad vg = value_and_grad([&](const ParamTree& q) { return mlp_loss(q, x); }, p);
  EXPECT_NEAR(vg.value.item(), mlp_loss(p, x).item(), 1e-6);
  EXPECT_EQ(vg.grads.count("step"), 0u);  // integer params get no gradient
  for (const char* name : {"layers_0/wi/kernel", "layers_0/wo/kernel", "scale"}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(vg.grads.at(name).shape(), p.at(name).shape());
    auto g = vg.grads.at(name).to_floats();
    auto base = p.at(name).to_floats();
    for (size_t i = 0; i < base.size(); ++i) {
      ParamTree pp = p, pm = p;
      auto vp = base, vm = base;
      vp[i] += 1e-2f;
      vm[i] -= 1e-2f;
      pp[name] = Array::from_floats(p.at(name).shape(), vp);
      pm[name] = Array::from_floats(p.at(name).shape(), vm);
      double num = (mlp_loss(pp, x).item() - mlp_loss(pm, x).item()) / 2e-2;
      EXPECT_NEAR(g[i], num, 2e-3 + 2e-2 * std::fabs(num));
    }
  }
}

TEST(Autodiff, UnusedParamGetsZerosAndStopGradientBlocks) {
  ParamTree p = {{"a", Array::scalar(2.0)}, {"b", Array::scalar(5.0)}, {"unused", Array::ones(Shape{{"n", 2}})}};
  auto vg = value_and_grad([](const ParamTree& q) { return add(mul(q.at("a"), q.at("a")), mul(stop_gradient(q.at("a")), q.at("b"))); }, p);
  EXPECT_EQ(vg.value.item(), 4.0 + 10.0);
  EXPECT_EQ(vg.grads.at("a").item(), 4.0);  // d(a^2)/da; the stopped branch adds nothing
  EXPECT_EQ(vg.grads.at("b").item(), 2.0);
  EXPECT_EQ(vg.grads.at("unused").to_floats(), (std::vector<float>{0, 0}));
  // A value used twice accumulates both paths.
  auto vg2 = value_and_grad([](const ParamTree& q) { Array t = exp(q.at("a")); return add(t, mul(t, q.at("a"))); }, p);
  EXPECT_NEAR(vg2.grads.at("a").item(), std::exp(2.0) * (1 + 2 + 1), 1e-4);
}

TEST(Autodiff, MicrobatchAccumulationEqualsFullBatch) {
  ParamTree p = make_params();
  Array x = rand_array(Shape{{"batch", 4}, {"embed", 4}}, 5);
  auto full = value_and_grad([&](const ParamTree& q) { return mul(mlp_loss(q, x), 4.0); }, p);
  ParamTree acc;
  for (int m = 0; m < 4; ++m) {
    Array xm = slice(x, "batch", m, 1);
    accumulate_grads(acc, value_and_grad([&](const ParamTree& q) { return mlp_loss(q, xm); }, p).grads);
  }
  for (const auto& [k, g] : full.grads) EXPECT_LT(max_abs_diff(acc.at(k), g), 1e-5) << k;
}

// Mixed precision as in the models: float32 parameters cast to bfloat16 for
// the product. The weight gradient (a sum over 'batch') leaves the GEMM in
// float32, so the gradients of two half batches add up to the full batch's
// to float32 rounding (what data parallelism over processes relies on).
TEST(Autodiff, BatchSummedWeightGradientsOfBf16ProductsStayFloat32) {
  const int64_t B = 8, L = 16, E = 32, M = 24;
  ParamTree p = {{"wi", rand_array(Shape{{"embed", E}, {"mlp", M}}, 11)},
                 {"wo", rand_array(Shape{{"mlp", M}, {"embed", E}}, 12)}};
  Array x = cast(rand_array(Shape{{"batch", B}, {"length", L}, {"embed", E}}, 13), DType::bf16);
  auto loss_of = [](const Array& xs) {
    return [xs](const ParamTree& q) {
      Array h = einsum(xs, cast(q.at("wi"), DType::bf16), {"batch", "length", "mlp"});
      Array w = reshape(cast(q.at("wo"), DType::bf16), Shape{{"mlp", 24}, {"embed", 32}});
      Array y = einsum(gelu(h), w, {"batch", "length", "embed"});
      return sum(square(cast(y, DType::f32)));
    };
  };
  auto full = value_and_grad(loss_of(x), p);
  auto lo = value_and_grad(loss_of(slice(x, "batch", 0, B / 2)), p);
  auto hi = value_and_grad(loss_of(slice(x, "batch", B / 2, B / 2)), p);
  for (const char* k : {"wi", "wo"}) {
    SCOPED_TRACE(k);
    ASSERT_EQ(full.grads.at(k).dtype(), DType::f32);
    auto g = full.grads.at(k).to_floats();
    auto a = lo.grads.at(k).to_floats(), b = hi.grads.at(k).to_floats();
    double worst = 0, scale = 0, off_bf16 = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      worst = std::max(worst, std::fabs(double(a[i]) + double(b[i]) - double(g[i])));
      scale = std::max(scale, std::fabs(double(g[i])));
      off_bf16 = std::max(off_bf16, std::fabs(double(float(bfloat16(g[i]))) - double(g[i])));
    }
    // float32 partial sums: ~1e-7 relative; bfloat16 partials would be ~4e-3.
    EXPECT_LT(worst, 2e-6 * scale);
    // The gradient is not bfloat16-rounded (it has bits below bfloat16's).
    EXPECT_GT(off_bf16, 1e-4 * scale);
  }
}

TEST(Autodiff, AuxOutputsAreReturnedNotDifferentiated) {
  ParamTree p = {{"w", Array::scalar(3.0)}};
  auto r = value_and_grad_with_aux([](const ParamTree& q) {
    Array z = square(q.at("w"));
    return std::make_pair(z, ParamTree{{"z_half", mul(z, 0.5)}});
  }, p);
  EXPECT_EQ(r.aux.at("z_half").item(), 4.5);
  EXPECT_EQ(r.grads.at("w").item(), 6.0);
  EXPECT_FALSE(is_recording());
}

// Identity whose vjp records the live bytes when the backward pass reaches it.
class Probe : public Primitive {
 public:
  explicit Probe(int64_t* seen) : seen_(seen) {}
  const char* name() const override { return "probe"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {in[0].copy()}; }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    *seen_ = live_bytes();
    return {cot[0]};
  }

 private:
  int64_t* seen_;
};

// A chain of 12 tanh layers over a 1 MB activation.
Array chain(const Array& x, int64_t* probe, int64_t* after_forward, bool remat) {
  Array h = apply1(std::make_shared<Probe>(probe), {x});
  auto block = [](const std::vector<Array>& v) {
    Array t = v[0];
    for (int i = 0; i < 4; ++i) t = tanh(mul(t, 1.1));
    return std::vector<Array>{t};
  };
  ArrayFn f = remat ? checkpoint(block) : ArrayFn(block);
  for (int b = 0; b < 3; ++b) h = f({h})[0];
  Array loss = sum(h);
  *after_forward = live_bytes();
  return loss;
}

TEST(Autodiff, ActivationsAreReleasedDuringBackward) {
  const Shape s{{"batch", 256}, {"embed", 1024}};  // 1 MiB of f32
  const int64_t mib = 1 << 20;
  ParamTree p = {{"x", rand_array(s, 6)}};
  int64_t probe = 0, fwd = 0;
  int64_t base = live_bytes();
  auto vg = value_and_grad([&](const ParamTree& q) { return chain(q.at("x"), &probe, &fwd, false); }, p);
  // After the forward pass the tape holds the saved activations (>= 12 MiB:
  // tanh saves its output, mul its inputs).
  EXPECT_GT(fwd - base, 12 * mib);
  // When the backward pass reaches the first op, all of them are gone: only
  // the cotangent in flight and a few buffers remain.
  EXPECT_LT(probe - base, 4 * mib);
  EXPECT_EQ(vg.grads.at("x").shape(), s);
}

// A training loop repeats its shapes from step to step: after the first step
// every buffer of kCachedMinBytes or more comes back from the CPU allocator's
// cache (core/allocator.h), none from a new mapping, so no step after the
// first faults in fresh pages.
TEST(Autodiff, StepsAfterTheFirstMapNoNewBuffers) {
  Allocator& a = cpu_allocator();
  struct RestoreLimit {
    Allocator& a;
    size_t saved = a.cache_limit();
    ~RestoreLimit() { a.set_cache_limit(saved); }
  } restore{a};
  a.set_cache_limit(size_t(1) << 30);
  ParamTree p = {{"layers_0/wi/kernel", rand_array(Shape{{"embed", 256}, {"mlp", 512}}, 11)},
                 {"layers_0/wo/kernel", rand_array(Shape{{"mlp", 512}, {"embed", 256}}, 12)},
                 {"scale", rand_array(Shape{{"embed", 256}}, 13, 0.5, 1.5)}};
  const Array x = rand_array(Shape{{"batch", 512}, {"embed", 256}}, 14);  // 512 KiB; the hidden layer 1 MiB
  a.clear_cache();
  const size_t before = a.mapped_blocks();
  std::vector<size_t> mapped;
  for (int step = 0; step < 4; ++step) {
    ValueAndGrad vg = value_and_grad([&](const ParamTree& q) { return mlp_loss(q, x); }, p);
    for (auto& [path, w] : p) w = sub(w, mul(vg.grads.at(path), 0.01));  // new params, as an optimizer makes
    mapped.push_back(a.mapped_blocks());
  }
  EXPECT_GT(mapped[0], before) << "no buffer of the first step was large enough to be cached; the test proves nothing";
  EXPECT_EQ(mapped[1], mapped[2]) << "the third step mapped new buffers";
  EXPECT_EQ(mapped[2], mapped[3]) << "the fourth step mapped new buffers";
}

TEST(Autodiff, RematGivesSameGradsAndStoresLess) {
  const Shape s{{"batch", 256}, {"embed", 1024}};
  const int64_t mib = 1 << 20;
  ParamTree p = {{"x", rand_array(s, 7)}};
  int64_t probe = 0, fwd_plain = 0, fwd_remat = 0;
  int64_t base = live_bytes();
  auto plain = value_and_grad([&](const ParamTree& q) { return chain(q.at("x"), &probe, &fwd_plain, false); }, p);
  auto remat = value_and_grad([&](const ParamTree& q) { return chain(q.at("x"), &probe, &fwd_remat, true); }, p);
  EXPECT_TRUE(array_equal(plain.grads.at("x"), remat.grads.at("x")));
  EXPECT_EQ(plain.value.item(), remat.value.item());
  // Remat keeps only the 3 block inputs (+ the probe output) after the forward pass.
  EXPECT_LT(fwd_remat - base, 6 * mib);
  EXPECT_GT(fwd_plain - fwd_remat, 8 * mib);
}

TEST(Autodiff, CheckpointPassesGradToEveryArgument) {
  Array a = rand_array(Shape{{"n", 5}}, 8), b = rand_array(Shape{{"n", 5}}, 9);
  ArrayFn f = checkpoint([](const std::vector<Array>& v) { return std::vector<Array>{mul(exp(v[0]), v[1])}; });
  check_grad([&](const std::vector<Array>& v) { return f(v)[0]; }, {a, b});
}

TEST(Autodiff, ErrorsInsideFnLeaveNoTapeBehind) {
  ParamTree p = {{"w", Array::ones(Shape{{"n", 2}})}};
  EXPECT_THROW(value_and_grad([](const ParamTree& q) { return add(q.at("w"), Array::ones(Shape{{"n", 3}})); }, p),
               std::invalid_argument);
  EXPECT_FALSE(is_recording());
  auto vg = value_and_grad([](const ParamTree& q) { return sum(square(q.at("w"))); }, p);
  EXPECT_EQ(vg.grads.at("w").to_floats(), (std::vector<float>{2, 2}));
}

TEST(Autodiff, SgdOnATinyT5StyleBlockReducesLoss) {
  // rms_norm -> gated-GELU MLP -> logits -> cross-entropy, 30 SGD steps.
  ParamTree p = {{"norm/scale", Array::ones(Shape{{"embed", 8}})},
                 {"wi_0", mul(rand_array(Shape{{"embed", 8}, {"mlp", 16}}, 1), 0.3)},
                 {"wi_1", mul(rand_array(Shape{{"embed", 8}, {"mlp", 16}}, 2), 0.3)},
                 {"wo", mul(rand_array(Shape{{"mlp", 16}, {"embed", 8}}, 3), 0.3)},
                 {"logits", mul(rand_array(Shape{{"embed", 8}, {"vocab", 5}}, 4), 0.3)}};
  Array x = rand_array(Shape{{"batch", 4}, {"length", 3}, {"embed", 8}}, 5);
  Array targets = Array::from_vector<int32_t>(Shape{{"batch", 4}, {"length", 3}}, {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1});
  auto loss_fn = [&](const ParamTree& q) {
    Array h = rms_norm(x, q.at("norm/scale"));
    h = add(x, gated_gelu_mlp(h, q.at("wi_0"), q.at("wi_1"), q.at("wo")));
    Array logits = einsum(h, q.at("logits"), {"batch", "length", "vocab"});
    return mean(softmax_cross_entropy_with_integer_labels(logits, targets, 1e-4).loss);
  };
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    auto vg = value_and_grad(loss_fn, p);
    if (step == 0) first = vg.value.item();
    last = vg.value.item();
    for (auto& [k, v] : p) v = sub(v, mul(vg.grads.at(k), 0.5));
  }
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
}

TEST(Autodiff, LossMustBeScalar) {
  ParamTree p = {{"w", Array::ones(Shape{{"n", 2}})}};
  expect_invalid([&] { value_and_grad([](const ParamTree& q) { return q.at("w"); }, p); },
                 {"[value_and_grad]", "scalar", "[n=2]"});
}

}  // namespace
}  // namespace t5x
