// Elementwise ops: values against naive loops, broadcasting by name, dtypes, vjps.
#include <cmath>

#include "harness.h"

namespace t5x {
namespace {
using namespace testing;

const Shape kBLE{{"batch", 2}, {"length", 3}, {"embed", 4}};

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

struct UnaryCase {
  const char* name;
  Array (*op)(const Array&);
  double (*ref)(double);
  float lo, hi;
};

TEST(Elementwise, UnaryMatchesReferenceAndGradients) {
  std::vector<UnaryCase> cases = {
      {"neg", neg, [](double x) { return -x; }, -2, 2},
      {"abs", abs, [](double x) { return std::fabs(x); }, -2, 2},
      {"sign", sign, [](double x) { return double((x > 0) - (x < 0)); }, -2, 2},
      {"square", square, [](double x) { return x * x; }, -2, 2},
      {"exp", exp, [](double x) { return std::exp(x); }, -2, 2},
      {"log", log, [](double x) { return std::log(x); }, 0.5, 3},
      {"tanh", tanh, [](double x) { return std::tanh(x); }, -2, 2},
      {"sqrt", sqrt, [](double x) { return std::sqrt(x); }, 0.5, 3},
      {"rsqrt", rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.5, 3},
      {"sigmoid", sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -3, 3},
      {"relu", relu, [](double x) { return x > 0 ? x : 0.0; }, -2, 2},
      {"gelu", gelu, gelu_ref, -3, 3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    for (Shape s : {Shape{{"embed", 5}}, kBLE, Shape{{"n", 70000}}}) {
      Array x = rand_array(s, 1, c.lo, c.hi);
      Array y = c.op(x);
      ASSERT_EQ(y.shape(), s);
      auto xv = x.to_floats(), yv = y.to_floats();
      for (size_t i = 0; i < xv.size(); ++i) ASSERT_NEAR(yv[i], c.ref(xv[i]), 1e-5 * (1 + std::fabs(c.ref(xv[i]))));
    }
    // Keep relu / abs away from the kink for finite differences.
    Array x = rand_array(kBLE, 2, c.lo, c.hi);
    const std::string n = c.name;
    if (n == "relu" || n == "abs" || n == "sign") x = add(x, mul(sign(x), 0.1));
    check_grad([&](const std::vector<Array>& v) { return c.op(v[0]); }, {x});
  }
}

TEST(Elementwise, Bf16AndF16ComputeInF32AndRoundBack) {
  Array x = rand_array(kBLE, 3, -2, 2, DType::bf16);
  Array y = exp(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  auto xv = x.to_floats(), yv = y.to_floats();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(yv[i], float(bfloat16(std::exp(xv[i]))));
  Array h = rand_array(kBLE, 4, -2, 2, DType::f16);
  Array z = mul(h, h);
  auto hv = h.to_floats(), zv = z.to_floats();
  for (size_t i = 0; i < hv.size(); ++i) EXPECT_EQ(zv[i], float(float16(hv[i] * hv[i])));
}

TEST(Elementwise, BinaryBroadcastsByName) {
  Array x = rand_array(kBLE, 5);
  Array s = rand_array(Shape{{"embed", 4}}, 6);
  Array b = rand_array(Shape{{"length", 3}, {"batch", 2}}, 7);  // other order on purpose
  Array y = add(mul(x, s), b);
  ASSERT_EQ(y.shape(), kBLE);
  for_each_index(kBLE, [&](const auto& i) {
    float want = at(x, i) * at(s, {{"embed", i.at("embed")}}) + at(b, {{"length", i.at("length")}, {"batch", i.at("batch")}});
    EXPECT_NEAR(at(y, i), want, 1e-6);
  });
  // Outer product: dims of the second operand are appended.
  Array o = mul(rand_array(Shape{{"q", 3}}, 8), rand_array(Shape{{"k", 2}}, 9));
  EXPECT_EQ(o.shape(), (Shape{{"q", 3}, {"k", 2}}));
}

TEST(Elementwise, BinaryValuesAndGradients) {
  Array a = rand_array(kBLE, 10, 0.5, 2);
  Array b = rand_array(Shape{{"embed", 4}, {"batch", 2}}, 11, 0.5, 2);
  struct C { const char* n; Array (*op)(const Array&, const Array&); double (*ref)(double, double); };
  std::vector<C> cs = {{"add", add, [](double p, double q) { return p + q; }},
                       {"sub", sub, [](double p, double q) { return p - q; }},
                       {"mul", mul, [](double p, double q) { return p * q; }},
                       {"div", div, [](double p, double q) { return p / q; }},
                       {"maximum", maximum, [](double p, double q) { return std::max(p, q); }},
                       {"minimum", minimum, [](double p, double q) { return std::min(p, q); }}};
  for (const auto& c : cs) {
    SCOPED_TRACE(c.n);
    Array y = c.op(a, b);
    for_each_index(kBLE, [&](const auto& i) {
      double want = c.ref(at(a, i), at(b, {{"embed", i.at("embed")}, {"batch", i.at("batch")}}));
      EXPECT_NEAR(at(y, i), want, 1e-5 * (1 + std::fabs(want)));
    });
    check_grad([&](const std::vector<Array>& v) { return c.op(v[0], v[1]); }, {a, b});
  }
}

// The backward's gradient sums: over the sum's own buffer when nothing else
// holds it, else a new one; the values of add either way.
TEST(Elementwise, AddIntoWritesOverASoleOwnerOnly) {
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Array g = cast(rand_array(kBLE, 12, -1, 1), dt);
    const std::vector<float> want = add(cast(rand_array(kBLE, 13, -1, 1), dt), g).to_floats();
    Array acc = cast(rand_array(kBLE, 13, -1, 1), dt);  // sole owner
    const void* where = acc.raw_data();
    add_into(acc, g);
    EXPECT_EQ(acc.raw_data(), where);
    EXPECT_EQ(acc.to_floats(), want);
    Array shared = cast(rand_array(kBLE, 13, -1, 1), dt);
    const Array keep = shared;  // a second handle: must not change
    add_into(shared, g);
    EXPECT_FALSE(shared.same_buffer(keep));
    EXPECT_EQ(shared.to_floats(), want);
    EXPECT_EQ(keep.to_floats(), cast(rand_array(kBLE, 13, -1, 1), dt).to_floats());
    Array viewed = cast(rand_array(kBLE, 13, -1, 1), dt);
    const Array view = viewed.view_as(Shape{{"flat", 24}});  // shares the buffer
    add_into(viewed, g);
    EXPECT_FALSE(viewed.same_buffer(view));
    EXPECT_EQ(view.to_floats(), cast(rand_array(kBLE, 13, -1, 1), dt).to_floats());
    Array other_order = cast(rand_array(Shape{{"embed", 4}, {"batch", 2}, {"length", 3}}, 14, -1, 1), dt);
    add_into(other_order, g);  // dims in another order: broadcast add, new buffer
    EXPECT_EQ(other_order.names(), (std::vector<std::string>{"embed", "batch", "length"}));
  }
}

TEST(Elementwise, MaximumSplitsGradientOnTies) {
  Array a = Array::from_vector<float>(Shape{{"n", 3}}, {1, 2, 3});
  Array b = Array::from_vector<float>(Shape{{"n", 3}}, {1, 5, 0});
  auto [o, g] = vjp([](const std::vector<Array>& v) { return std::vector<Array>{maximum(v[0], v[1])}; }, {a, b},
                    {Array::ones(Shape{{"n", 3}})});
  EXPECT_EQ(g[0].to_floats(), (std::vector<float>{0.5f, 0, 1}));
  EXPECT_EQ(g[1].to_floats(), (std::vector<float>{0.5f, 1, 0}));
}

TEST(Elementwise, IntegerArithmeticAndComparisons) {
  Array a = Array::from_vector<int32_t>(Shape{{"n", 4}}, {1, -2, 7, 0});
  Array b = Array::from_vector<int32_t>(Shape{{"n", 4}}, {3, -2, 2, 5});
  EXPECT_EQ(add(a, b).to_ints(), (std::vector<int64_t>{4, -4, 9, 5}));
  EXPECT_EQ(div(a, b).to_ints(), (std::vector<int64_t>{0, 1, 3, 0}));
  EXPECT_EQ(abs(a).to_ints(), (std::vector<int64_t>{1, 2, 7, 0}));
  Array c = lt(a, b);
  EXPECT_EQ(c.dtype(), DType::boolean);
  EXPECT_EQ(c.to_ints(), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(eq(a, b).to_ints(), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(ne(a, b).to_ints(), (std::vector<int64_t>{1, 0, 1, 1}));
  EXPECT_EQ(le(a, b).to_ints(), (std::vector<int64_t>{1, 1, 0, 1}));
  EXPECT_EQ(gt(a, b).to_ints(), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(ge(a, b).to_ints(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(logical_and(lt(a, b), ge(a, 0.0)).to_ints(), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(logical_or(lt(a, b), gt(a, 5.0)).to_ints(), (std::vector<int64_t>{1, 0, 1, 1}));
  EXPECT_EQ(logical_not(lt(a, b)).to_ints(), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(Elementwise, WhereBroadcastsAndRoutesGradients) {
  Array x = rand_array(kBLE, 12);
  Array y = rand_array(Shape{{"embed", 4}}, 13);
  Array cond = gt(rand_array(Shape{{"length", 3}, {"embed", 4}}, 14), 0.0);
  Array w = where(cond, x, y);
  ASSERT_EQ(w.shape(), kBLE);
  for_each_index(kBLE, [&](const auto& i) {
    bool c = at(cond, {{"length", i.at("length")}, {"embed", i.at("embed")}}) != 0;
    EXPECT_EQ(at(w, i), c ? at(x, i) : at(y, {{"embed", i.at("embed")}}));
  });
  check_grad([&](const std::vector<Array>& v) { return where(cond, v[0], v[1]); }, {x, y});
}

TEST(Elementwise, CastRoundsAndDifferentiates) {
  Array x = Array::from_vector<float>(Shape{{"n", 4}}, {1.00390625f, -2.7f, 0.f, 3.5f});
  EXPECT_EQ(cast(x, DType::i32).to_ints(), (std::vector<int64_t>{1, -2, 0, 3}));
  EXPECT_EQ(cast(x, DType::boolean).to_ints(), (std::vector<int64_t>{1, 1, 0, 1}));
  EXPECT_EQ(cast(x, DType::bf16).to_floats()[0], 1.0f);  // ties to even
  // The cotangent flows back through the bf16 round trip in bf16 precision.
  Array x2 = rand_array(kBLE, 15);
  Array w = rand_array(kBLE, 16);
  auto [o, g] = vjp([](const std::vector<Array>& v) {
    return std::vector<Array>{cast(mul(cast(v[0], DType::bf16), 2.0), DType::f32)};
  }, {x2}, {w});
  EXPECT_EQ(g[0].dtype(), DType::f32);
  auto gv = g[0].to_floats(), wv = w.to_floats();
  for (size_t i = 0; i < gv.size(); ++i) EXPECT_EQ(gv[i], float(bfloat16(float(bfloat16(wv[i])) * 2.f)));
}

TEST(Elementwise, OperatorsAndScalars) {
  Array x = Array::from_vector<float>(Shape{{"n", 3}}, {1, 2, 3});
  EXPECT_EQ((x * 2.0 + 1.0).to_floats(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ((1.0 - x).to_floats(), (std::vector<float>{0, -1, -2}));
  EXPECT_EQ((x / x).to_floats(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ((-x).to_floats(), (std::vector<float>{-1, -2, -3}));
}

TEST(Elementwise, MisuseNamesOpDimsAndDtypes) {
  Array x = rand_array(kBLE, 1);
  expect_invalid([&] { add(x, rand_array(Shape{{"embed", 5}}, 2)); }, {"[add]", "'embed'", "4", "5"});
  expect_invalid([&] { mul(x, rand_array(Shape{{"embed", 4}}, 2, -1, 1, DType::bf16)); },
                 {"[mul]", "dtype mismatch", "float32", "bfloat16"});
  expect_invalid([&] { exp(Array::zeros(Shape{{"n", 2}}, DType::i32)); }, {"[exp]", "floating", "int32"});
  expect_invalid([&] { where(x, x, x); }, {"[where]", "bool", "float32"});
}

TEST(Elementwise, ClipMasksAndScalarWhere) {
  Array x = Array::from_vector<float>(Shape{{"n", 5}}, {-3, -0.5f, 0.5f, 3, NAN});
  auto c = clip(x, -1, 1).to_floats();
  EXPECT_EQ(std::vector<float>(c.begin(), c.begin() + 4), (std::vector<float>{-1, -0.5f, 0.5f, 1}));
  EXPECT_EQ(isnan(x).to_ints(), (std::vector<int64_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(isfinite(div(x, Array::from_vector<float>(Shape{{"n", 5}}, {1, 0, 1, 1, 1}))).to_ints(),
            (std::vector<int64_t>{1, 0, 1, 1, 0}));
  Array y = where(gt(x, 0.0), 7.0, x);
  EXPECT_EQ(y.to_floats()[0], -3.f);
  EXPECT_EQ(y.to_floats()[3], 7.f);
}

// Every 16-bit result equals the f32 computation on the rounded inputs,
// rounded once (the documented "compute in f32, round back" rule).
TEST(Elementwise, SixteenBitDtypesRoundOnce) {
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    Array a = rand_array(kBLE, 30, 0.5, 2, dt), b = rand_array(Shape{{"embed", 4}}, 31, 0.5, 2, dt);
    Array a32 = cast(a, DType::f32), b32 = cast(b, DType::f32);
    std::vector<std::pair<Array, Array>> pairs = {
        {add(a, b), add(a32, b32)}, {sub(a, b), sub(a32, b32)}, {mul(a, b), mul(a32, b32)},
        {div(a, b), div(a32, b32)}, {maximum(a, b), maximum(a32, b32)}, {log(a), log(a32)},
        {rsqrt(a), rsqrt(a32)}, {square(a), square(a32)}, {sum(a, {"length"}), sum(a32, {"length"})},
        {max(a, {"batch"}), max(a32, {"batch"})}, {log_softmax(a, "embed"), log_softmax(a32, "embed")}};
    for (size_t i = 0; i < pairs.size(); ++i) {
      EXPECT_EQ(pairs[i].first.dtype(), dt) << i;
      EXPECT_TRUE(array_equal(pairs[i].first, cast(pairs[i].second, dt))) << "case " << i;
    }
  }
}

TEST(Elementwise, ShardedInputsAreRejectedReplicatedAccepted) {
  auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data"}, {2}, 0});
  Array split(Shape{{"batch", 4}, {"embed", 2}}, DType::f32, Sharding{mesh, PartitionSpec({{"data"}, {}})});
  expect_invalid([&] { add(split, split); }, {"[add]", "sharded inputs not supported yet", "batch=4"});
  expect_invalid([&] { sum(split, {"batch"}); }, {"[sum]", "sharded inputs not supported yet"});
  Array rep = Array::ones(Shape{{"batch", 4}, {"embed", 2}}).with_sharding(Sharding{mesh, PartitionSpec::replicated(2)});
  Array y = mul(rep, 3.0);
  EXPECT_EQ(y.sharding().mesh, mesh);  // replicated in, replicated out
  EXPECT_TRUE(y.is_fully_local());
  EXPECT_EQ(sum(y).item(), 24.0);
}

}  // namespace
}  // namespace t5x
