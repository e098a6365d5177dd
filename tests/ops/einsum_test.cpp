// Named einsum / matmul against naive loops; vjps; errors.
#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "harness.h"

namespace t5x {
namespace {
using namespace testing;

// Naive einsum by names: loops over the union of dims.
Array naive_einsum(const Array& x, const Array& y, const std::vector<std::string>& out) {
  std::vector<Dim> all = x.shape().dims();
  for (const Dim& d : y.shape().dims())
    if (!x.has_dim(d.name)) all.push_back(d);
  std::vector<Dim> od;
  for (const auto& n : out) od.push_back({n, x.has_dim(n) ? x.dim(n) : y.dim(n)});
  Shape os(od);
  std::vector<float> r(size_t(os.numel()), 0.f);
  std::vector<double> acc(r.size(), 0.0);
  auto xv = x.to_floats(), yv = y.to_floats();
  for_each_index(Shape(all), [&](const auto& i) {
    std::map<std::string, int64_t> xi, yi, oi;
    for (const Dim& d : x.shape().dims()) xi[d.name] = i.at(d.name);
    for (const Dim& d : y.shape().dims()) yi[d.name] = i.at(d.name);
    for (const auto& n : out) oi[n] = i.at(n);
    acc[size_t(offset(os, oi))] += double(xv[size_t(offset(x.shape(), xi))]) * yv[size_t(offset(y.shape(), yi))];
  });
  for (size_t i = 0; i < r.size(); ++i) r[i] = float(acc[i]);
  return Array::from_floats(os, r);
}

struct Case {
  Shape x, y;
  std::vector<std::string> out;
};

TEST(Einsum, MatchesNaiveLoopsForManyLayouts) {
  std::vector<Case> cases = {
      {Shape{{"batch", 2}, {"length", 3}, {"embed", 4}}, Shape{{"embed", 4}, {"mlp", 5}}, {"batch", "length", "mlp"}},
      {Shape{{"batch", 2}, {"length", 3}, {"embed", 4}}, Shape{{"mlp", 5}, {"embed", 4}}, {"mlp", "batch", "length"}},
      {Shape{{"batch", 2}, {"q", 3}, {"heads", 2}, {"kv", 4}}, Shape{{"batch", 2}, {"k", 5}, {"heads", 2}, {"kv", 4}},
       {"batch", "heads", "q", "k"}},
      {Shape{{"batch", 2}, {"heads", 2}, {"q", 3}, {"k", 5}}, Shape{{"batch", 2}, {"k", 5}, {"heads", 2}, {"kv", 4}},
       {"batch", "q", "heads", "kv"}},
      {Shape{{"embed", 4}, {"length", 3}}, Shape{{"embed", 4}, {"vocab", 6}}, {"length", "vocab"}},
      {Shape{{"a", 3}, {"x", 2}}, Shape{{"b", 4}, {"y", 2}}, {"a", "b"}},        // sums out x and y first
      {Shape{{"a", 3}}, Shape{{"b", 4}}, {"b", "a"}},                          // outer product
      {Shape{{"a", 3}, {"k", 7}}, Shape{{"k", 7}}, {"a"}},                     // matrix-vector
      {Shape{{"a", 70}, {"k", 64}}, Shape{{"k", 64}, {"b", 33}}, {"a", "b"}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(c);
    Array x = rand_array(cases[c].x, uint32_t(10 + c)), y = rand_array(cases[c].y, uint32_t(20 + c));
    Array got = einsum(x, y, cases[c].out);
    expect_close(got, naive_einsum(x, y, cases[c].out), 1e-5);
    if (x.size() * y.size() < 5000)
      check_grad([&](const std::vector<Array>& v) { return einsum(v[0], v[1], cases[c].out); }, {x, y});
  }
}

TEST(Einsum, StringSpecAndMatmul) {
  Array x = rand_array(Shape{{"batch", 2}, {"length", 3}, {"embed", 4}}, 1);
  Array w = rand_array(Shape{{"embed", 4}, {"mlp", 5}}, 2);
  Array a = einsum("batch length embed, embed mlp -> batch length mlp", x, w);
  Array b = matmul(x, w, "embed");
  EXPECT_EQ(a.shape(), (Shape{{"batch", 2}, {"length", 3}, {"mlp", 5}}));
  EXPECT_TRUE(array_equal(a, b));
  expect_close(a, naive_einsum(x, w, {"batch", "length", "mlp"}), 1e-5);
}

TEST(Einsum, Bf16AndF16) {
  Array x = rand_array(Shape{{"m", 5}, {"k", 16}}, 3);
  Array y = rand_array(Shape{{"k", 16}, {"n", 7}}, 4);
  Array ref = einsum(cast(cast(x, DType::bf16), DType::f32), cast(cast(y, DType::bf16), DType::f32), {"m", "n"});
  Array got = einsum(cast(x, DType::bf16), cast(y, DType::bf16), {"m", "n"});
  EXPECT_EQ(got.dtype(), DType::bf16);
  EXPECT_LT(max_abs_diff(cast(got, DType::f32), ref), 0.05);
  Array h = einsum(cast(x, DType::f16), cast(y, DType::f16), {"m", "n"});
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_LT(max_abs_diff(cast(h, DType::f32), einsum(x, y, {"m", "n"})), 0.02);
}

TEST(Einsum, Misuse) {
  Array x = rand_array(Shape{{"batch", 2}, {"embed", 4}}, 1);
  Array w = rand_array(Shape{{"embed", 3}, {"mlp", 5}}, 2);
  expect_invalid([&] { einsum(x, w, {"batch", "mlp"}); }, {"[einsum]", "'embed'", "4", "3"});
  Array w4 = rand_array(Shape{{"embed", 4}, {"mlp", 5}}, 2);
  expect_invalid([&] { einsum(x, w4, {"batch", "vocab"}); }, {"[einsum]", "'vocab'", "neither"});
  expect_invalid([&] { einsum("batch embed, hidden mlp -> batch mlp", x, w4); }, {"[einsum]", "hidden", "y"});
  expect_invalid([&] { matmul(x, w4, "length"); }, {"[matmul]", "'length'"});
  expect_invalid([&] { einsum(x, cast(w4, DType::bf16), {"batch", "mlp"}); }, {"[einsum]", "float32", "bfloat16"});
  expect_invalid([&] { einsum(cast(x, DType::i32), cast(w4, DType::i32), {"batch", "mlp"}); }, {"[einsum]", "int32"});
}

// The bits of an array, for exact comparisons (bf16 widens exactly).
std::vector<uint32_t> bits(const Array& a) {
  std::vector<uint32_t> out;
  for (float f : a.to_floats()) out.push_back(std::bit_cast<uint32_t>(f));
  return out;
}

// EinsumPrecision::operand_dtype: the result and both cotangents are bitwise
// those of the einsum of the cast operands with the casts' vjps (a float32
// operand's cotangent float32), whichever operand is the float32 one, with
// B or A stored transposed, an operand that needs a transpose, a dim summed
// out first, and a wide (float32) result; a float32 (wide) cotangent gives
// the gradients of that cotangent rounded to bf16.
TEST(Einsum, OperandDtypeGivesTheCastOperandsBitsAndGrads) {
  struct MixedCase {
    Shape x, y;
    std::vector<std::string> out;
    bool x_f32;  // which operand is stored float32 (the other bf16)
    bool wide;
  };
  const Shape act{{"batch", 2}, {"length", 9}, {"embed", 40}};
  const std::vector<MixedCase> cases = {
      {act, Shape{{"embed", 40}, {"mlp", 70}}, {"batch", "length", "mlp"}, false, false},
      {act, Shape{{"embed", 40}, {"mlp", 70}}, {"batch", "length", "mlp"}, false, true},
      {Shape{{"batch", 2}, {"length", 9}, {"mlp", 70}}, Shape{{"embed", 40}, {"mlp", 70}},
       {"batch", "length", "embed"}, false, false},                                         // B transposed
      {Shape{{"embed", 40}, {"mlp", 70}}, act, {"mlp", "batch", "length"}, true, false},  // A the f32 one
      {Shape{{"batch", 2}, {"length", 9}, {"heads", 3}, {"kv", 8}}, Shape{{"heads", 3}, {"kv", 8}, {"embed", 40}},
       {"batch", "length", "embed"}, false, false},
      {act, Shape{{"mlp", 6}, {"embed", 40}, {"heads", 3}}, {"batch", "heads", "mlp"}, false, false},  // y transposed
      {act, Shape{{"embed", 40}, {"mlp", 70}, {"extra", 3}}, {"batch", "length", "mlp"}, false, false},  // summed first
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(c);
    const MixedCase& mc = cases[c];
    // The float32 operand is not bf16-representable, so the rounding matters.
    Array x = rand_array(mc.x, uint32_t(40 + c)), y = rand_array(mc.y, uint32_t(50 + c));
    if (mc.x_f32) y = cast(y, DType::bf16);
    else x = cast(x, DType::bf16);
    const EinsumPrecision fused{.wide_result = mc.wide, .operand_dtype = DType::bf16};
    const EinsumPrecision plain{.wide_result = mc.wide};
    auto bf = [](const Array& a) { return a.dtype() == DType::bf16 ? a : cast(a, DType::bf16); };
    Array want = einsum(bf(x), bf(y), mc.out, plain);
    Array got = einsum(x, y, mc.out, fused);
    EXPECT_EQ(got.dtype(), mc.wide ? DType::f32 : DType::bf16);
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_EQ(bits(got), bits(want));
    // Cotangents through a loss with a non-uniform weight per element.
    const Array r = rand_array(want.shape(), uint32_t(60 + c));
    auto loss = [&](bool use_fused) {
      return [&, use_fused](const ParamTree& p) {
        Array v = use_fused ? einsum(p.at("x"), p.at("y"), mc.out, fused)
                            : einsum(bf(p.at("x")), bf(p.at("y")), mc.out, plain);
        return sum(mul(cast(v, DType::f32), r));
      };
    };
    const ParamTree params{{"x", x}, {"y", y}};
    const ValueAndGrad g0 = value_and_grad(loss(false), params), g1 = value_and_grad(loss(true), params);
    EXPECT_EQ(bits(g1.value), bits(g0.value));
    for (const char* n : {"x", "y"}) {
      SCOPED_TRACE(n);
      EXPECT_EQ(g1.grads.at(n).dtype(), g0.grads.at(n).dtype());
      EXPECT_EQ(bits(g1.grads.at(n)), bits(g0.grads.at(n)));
    }
    EXPECT_EQ(g1.grads.at(mc.x_f32 ? "x" : "y").dtype(), DType::f32);
    // The float32 cotangent above (r, through the cast's vjp) reaches the
    // einsum as it is and is rounded by the products; a bf16 cotangent of
    // the same values rounded first (r cast to bf16, through a bf16 mul)
    // gives the same gradient bits.
    if (mc.wide) continue;  // a float32 result's cotangent is float32 anyway
    const Array r16 = cast(r, DType::bf16);
    const ValueAndGrad g2 = value_and_grad(
        [&](const ParamTree& p) {
          return sum(cast(mul(einsum(p.at("x"), p.at("y"), mc.out, fused), r16), DType::f32));
        },
        params);
    for (const char* n : {"x", "y"}) {
      SCOPED_TRACE(std::string("bf16 cotangent, ") + n);
      EXPECT_EQ(bits(g2.grads.at(n)), bits(g1.grads.at(n)));
    }
  }
}

TEST(Einsum, OperandDtypeCastsOtherDtypes) {
  Array x = cast(rand_array(Shape{{"m", 5}, {"k", 16}}, 3), DType::bf16);
  Array y = cast(rand_array(Shape{{"k", 16}, {"n", 7}}, 4), DType::f16);
  // float32 compute of bf16 and f16 operands: the f32 product of the casts.
  Array got = einsum(x, y, {"m", "n"}, EinsumPrecision{.operand_dtype = DType::f32});
  EXPECT_EQ(got.dtype(), DType::f32);
  EXPECT_EQ(bits(got), bits(einsum(cast(x, DType::f32), cast(y, DType::f32), {"m", "n"})));
  // bf16 compute of an f16 operand: cast to bf16 first.
  Array h = einsum(x, y, {"m", "n"}, EinsumPrecision{.operand_dtype = DType::bf16});
  EXPECT_EQ(bits(h), bits(einsum(x, cast(y, DType::bf16), {"m", "n"})));
  expect_invalid([&] { einsum(x, y, {"m", "n"}, EinsumPrecision{.operand_dtype = DType::i32}); },
                 {"[einsum]", "operand_dtype", "int32"});
}

// screened_dense_argmax: argmax(einsum(x, kernel), "vocab") bitwise, for
// 1 to 8 rows (the screen) and 9 (the whole product), with columns the bf16
// screen cannot order (an exact copy of the maximum; one a single ulp away);
// its screen is the kernel rounded to bf16; misuse names the op and the fix.
TEST(Einsum, ScreenedDenseArgmaxIsTheProductsArgmax) {
  const int64_t vocab = 700, embed = 96;
  Array kernel = rand_array(Shape{{"vocab", vocab}, {"embed", embed}}, 21);
  const LogitsScreen screen = make_logits_screen(kernel);
  EXPECT_EQ(bits(screen.screen), bits(cast(kernel, DType::bf16)));
  EXPECT_EQ(screen.bounds.shape(), (Shape{{"vocab", vocab}, {"screen_bound", 2}}));
  for (int64_t rows : {1, 3, 8, 9}) {
    SCOPED_TRACE(rows);
    Array x = rand_array(Shape{{"batch", rows}, {"embed", embed}}, 30 + uint32_t(rows));
    // Row 0's largest logits: column 4 along x's row 0, column 9 its copy,
    // column 12 the same one ulp larger where x is positive.
    std::vector<float> w = kernel.to_floats();
    const std::vector<float> xv = x.to_floats();
    for (int64_t i = 0; i < embed; ++i) w[size_t(4 * embed + i)] = w[size_t(9 * embed + i)] = 2.0f * xv[size_t(i)];
    std::copy(w.begin() + 4 * embed, w.begin() + 5 * embed, w.begin() + 12 * embed);
    for (int64_t i = 0; i < embed; ++i)
      if (xv[size_t(i)] > 0) {
        w[size_t(12 * embed + i)] = std::nextafter(w[size_t(12 * embed + i)], 10.0f);
        break;
      }
    const Array k = Array::from_floats(kernel.shape(), w);
    const Array want = argmax(einsum(x, k, {"batch", "vocab"}), "vocab");
    const Array got = screened_dense_argmax(x, k, make_logits_screen(k));
    EXPECT_EQ(got.shape(), (Shape{{"batch", rows}}));
    EXPECT_EQ(got.dtype(), DType::i32);
    EXPECT_EQ(got.to_ints(), want.to_ints());
    EXPECT_TRUE(want.to_ints()[0] == 4 || want.to_ints()[0] == 12) << want.to_ints()[0];
    // x's dims in another order: the same.
    EXPECT_EQ(screened_dense_argmax(transpose(x, {"embed", "batch"}), k, make_logits_screen(k)).to_ints(),
              want.to_ints());
  }
  Array x = rand_array(Shape{{"batch", 2}, {"embed", embed}}, 40);
  expect_invalid([&] { screened_dense_argmax(cast(x, DType::bf16), kernel, screen); },
                 {"[screened_dense_argmax]", "x must be float32 [batch, embed]"});
  expect_invalid([&] { screened_dense_argmax(x, transpose(kernel, {"embed", "vocab"}), screen); },
                 {"[screened_dense_argmax]", "kernel must be float32 [vocab, embed]"});
  Array other = rand_array(Shape{{"vocab", vocab - 1}, {"embed", embed}}, 22);
  expect_invalid([&] { screened_dense_argmax(x, other, screen); },
                 {"[screened_dense_argmax]", "screen does not match", "make_logits_screen(kernel)"});
  expect_invalid([&] { make_logits_screen(cast(kernel, DType::bf16)); },
                 {"[make_logits_screen]", "float32 [vocab, embed]"});
}

// screened_dense_candidates: each row's candidates (ascending, padded with
// -1 / -inf) hold every entry at or above the row's keep-th largest logit,
// with einsum's values bitwise; 9 rows: no index array, the whole product.
TEST(Einsum, ScreenedDenseCandidatesHoldTheTopKOfTheProduct) {
  const int64_t vocab = 700, embed = 96;
  const Array kernel = rand_array(Shape{{"vocab", vocab}, {"embed", embed}}, 23);
  const LogitsScreen screen = make_logits_screen(kernel);
  for (int64_t rows : {1, 3, 8, 9})
    for (int64_t keep : {1, 5, 40}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " keep " + std::to_string(keep));
      const Array x = rand_array(Shape{{"batch", rows}, {"embed", embed}}, 50 + uint32_t(rows));
      const std::vector<float> want =
          transpose(einsum(x, kernel, {"batch", "vocab"}), {"batch", "vocab"}).to_floats();
      const ScreenedCandidateArrays c = screened_dense_candidates(x, kernel, screen, keep);
      EXPECT_EQ(c.vocab, vocab);
      if (rows > 8) {
        EXPECT_FALSE(c.index.valid());
        EXPECT_EQ(bits(c.value), bits(Array::from_floats(Shape{{"batch", rows}, {"candidates", vocab}}, want)));
        continue;
      }
      ASSERT_TRUE(c.index.valid());
      EXPECT_EQ(c.index.dtype(), DType::i32);
      const int64_t width = c.index.dim("candidates");
      EXPECT_LE(width, vocab / 4);  // narrowed
      const std::vector<int64_t> ix = transpose(c.index, {"batch", "candidates"}).to_ints();
      const std::vector<float> v = transpose(c.value, {"batch", "candidates"}).to_floats();
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = want.data() + r * vocab;
        std::vector<float> sorted(row, row + vocab);
        std::nth_element(sorted.begin(), sorted.begin() + (keep - 1), sorted.end(), std::greater<float>());
        std::vector<char> in(size_t(vocab), 0);
        int64_t last = -1;
        for (int64_t i = 0; i < width; ++i) {
          const int64_t j = ix[size_t(r * width + i)];
          if (j < 0) {
            EXPECT_EQ(v[size_t(r * width + i)], -std::numeric_limits<float>::infinity());
            continue;
          }
          EXPECT_GT(j, last);
          last = j;
          in[size_t(j)] = 1;
          EXPECT_EQ(std::bit_cast<uint32_t>(v[size_t(r * width + i)]), std::bit_cast<uint32_t>(row[j])) << j;
        }
        for (int64_t j = 0; j < vocab; ++j) {
          if (row[j] >= sorted[size_t(keep - 1)]) {
            EXPECT_TRUE(in[size_t(j)]) << "row " << r << " misses " << j;
          }
        }
      }
    }
  const Array x = rand_array(Shape{{"batch", 2}, {"embed", embed}}, 41);
  expect_invalid([&] { screened_dense_candidates(x, kernel, screen, 0); },
                 {"[screened_dense_candidates]", "keep must be >= 1"});
  expect_invalid([&] { screened_dense_candidates(cast(x, DType::bf16), kernel, screen, 3); },
                 {"[screened_dense_candidates]", "x must be float32 [batch, embed]"});
}

}  // namespace
}  // namespace t5x
