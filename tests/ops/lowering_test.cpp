// The typed sharded lowering (ops/lowering.h): apply() hands a primitive with
// a split input to its lower(), which calls the one method of the installed
// lowering for its op with the op's own arguments; fully local inputs never
// reach it; without a lowering, or without a lower() for the primitive, the
// error names the op; LoweringScope restores the previous lowering.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "ops/lowering.h"
#include "ops/ops.h"
#include "ops/primitive.h"

namespace t5x {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}
template <typename M>
std::string join_map(const M& m) {
  std::ostringstream s;
  for (const auto& [k, v] : m) s << k << "=" << v << ";";
  return s.str();
}

// Records each call as "method args" and returns a marker scalar (7).
class RecordingLowering : public ShardedLowering {
 public:
  mutable std::vector<std::string> calls;

  Array unary(UnaryOp op, const Array&) const override { return note(std::string("unary ") + op_name(op)); }
  Array binary(BinaryOp op, const Array&, const Array&) const override {
    return note(std::string("binary ") + op_name(op));
  }
  Array binary_scalar(BinaryOp op, const Array&, double b) const override {
    std::ostringstream s;
    s << "binary_scalar " << op_name(op) << " " << b;
    return note(s.str());
  }
  Array where(const Array& c, const Array&, const Array&) const override {
    return note("where " + std::string(dtype_name(c.dtype())));
  }
  Array cast(const Array&, DType dtype) const override { return note("cast " + std::string(dtype_name(dtype))); }
  Array reduce(Reduction op, const Array&, const std::vector<std::string>& dims) const override {
    return note(std::string("reduce ") + op_name(op) + " " + join(dims));
  }
  Array mean(const Array&, const std::vector<std::string>& dims) const override { return note("mean " + join(dims)); }
  Array logsumexp(const Array&, const std::vector<std::string>& dims) const override {
    return note("logsumexp " + join(dims));
  }
  Array softmax(const Array&, const std::string& dim, bool log) const override {
    return note("softmax " + dim + (log ? " log" : ""));
  }
  Array argmax(const Array&, const std::string& dim) const override { return note("argmax " + dim); }
  Array cumsum(const Array&, const std::string& dim, bool exclusive, bool reverse) const override {
    return note("cumsum " + dim + " " + std::to_string(exclusive) + std::to_string(reverse));
  }
  Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out) const override {
    return note("einsum " + join(x.names()) + " " + join(y.names()) + " " + join(out));
  }
  Array one_hot(const Array&, int64_t depth, const std::string& name, DType dtype) const override {
    return note("one_hot " + std::to_string(depth) + " " + name + " " + dtype_name(dtype));
  }
  Array take(const Array&, const Array&, const std::string& dim) const override { return note("take " + dim); }
  std::pair<Array, Array> top_k(const Array&, int64_t k, const std::string& dim) const override {
    return {note("top_k " + std::to_string(k) + " " + dim), Array::scalar(8)};
  }
  Array transpose(const Array&, const std::vector<std::string>& order) const override {
    return note("transpose " + join(order));
  }
  Array rename(const Array&, const std::map<std::string, std::string>& r) const override {
    return note("rename " + join_map(r));
  }
  Array reshape(const Array&, const Shape& shape) const override { return note("reshape " + shape.to_string()); }
  Array broadcast_to(const Array&, const Shape& shape) const override {
    return note("broadcast_to " + shape.to_string());
  }
  Array slice(const Array&, const std::string& dim, int64_t start, int64_t size) const override {
    return note("slice " + dim + " " + std::to_string(start) + " " + std::to_string(size));
  }
  Array pad(const Array&, const std::string& dim, int64_t lo, int64_t hi, double value) const override {
    std::ostringstream s;
    s << "pad " << dim << " " << lo << " " << hi << " " << value;
    return note(s.str());
  }
  Array concat(const std::vector<Array>& xs, const std::string& dim) const override {
    return note("concat " + std::to_string(xs.size()) + " " + dim);
  }
  Array stack(const std::vector<Array>& xs, const std::string& name, int axis) const override {
    return note("stack " + std::to_string(xs.size()) + " " + name + " " + std::to_string(axis));
  }
  Array expand_dims(const Array&, const std::string& name, int axis) const override {
    return note("expand_dims " + name + " " + std::to_string(axis));
  }
  Array squeeze(const Array&, const std::string& name) const override { return note("squeeze " + name); }
  Array dynamic_slice(const Array&, const std::map<std::string, int64_t>& starts,
                      const std::map<std::string, int64_t>& sizes) const override {
    return note("dynamic_slice " + join_map(starts) + " " + join_map(sizes));
  }
  Array dynamic_update_slice(const Array&, const Array&, const std::map<std::string, int64_t>& starts) const override {
    return note("dynamic_update_slice " + join_map(starts));
  }
  Array rms_norm(const Array&, const Array&, const std::string& dim, double eps) const override {
    std::ostringstream s;
    s << "rms_norm " << dim << " " << eps;
    return note(s.str());
  }
  CrossEntropy softmax_cross_entropy(const Array&, const Array&, double z_loss, double label_smoothing,
                                     const std::string& vocab) const override {
    std::ostringstream s;
    s << "softmax_cross_entropy " << z_loss << " " << label_smoothing << " " << vocab;
    return {note(s.str()), Array::scalar(9)};
  }
  Array gated_gelu(const Array&, const Array&) const override { return note("gated_gelu"); }
  Array fourier_mix(const Array&, const std::string& length, const std::string& embed) const override {
    return note("fourier_mix " + length + " " + embed);
  }
  Array attention(const Array&, const Array&, const Array&, const AttentionOptions& o) const override {
    return note("attention " + std::string(o.causal ? "causal " : "") + std::to_string(o.scale) +
                (o.kv_mask.valid() ? " kv_mask" : ""));
  }

 private:
  Array note(std::string s) const {
    calls.push_back(std::move(s));
    return Array::scalar(7);
  }
};

// A [batch=4, embed=2] array of which this process holds rows 0-1 (a 2-device
// mesh split over 'batch'): split, so apply() must not run a local kernel.
Array split_rows(const Shape& s, DType dt = DType::f32) {
  auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data"}, {2}, 0});
  std::vector<std::vector<std::string>> spec(size_t(s.rank()));
  spec[0] = {"data"};
  return Array(s, dt, Sharding{mesh, PartitionSpec(spec)});
}

class TypedLowering : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(sharded_lowering(), nullptr); }
  void TearDown() override { EXPECT_EQ(sharded_lowering(), nullptr); }
  // The one call `f` makes to the lowering, which returns the marker.
  std::string only_call(const std::function<Array()>& f) {
    RecordingLowering rec;
    LoweringScope scope(&rec);
    Array r = f();
    EXPECT_EQ(r.item(), 7.0);
    EXPECT_EQ(rec.calls.size(), 1u) << join(rec.calls);
    return rec.calls.empty() ? "" : rec.calls.back();
  }
};

TEST_F(TypedLowering, EachOpCallsItsMethodWithItsArguments) {
  const Shape s{{"batch", 4}, {"embed", 2}};
  const Array x = split_rows(s), y = split_rows(s), local = Array::ones(s);
  const Array b = split_rows(s, DType::boolean), ids = split_rows(Shape{{"batch", 4}}, DType::i32);
  EXPECT_EQ(only_call([&] { return exp(x); }), "unary exp");
  EXPECT_EQ(only_call([&] { return gelu(x); }), "unary gelu");
  EXPECT_EQ(only_call([&] { return relu(x); }), "unary relu");
  EXPECT_EQ(only_call([&] { return logical_not(b); }), "unary logical_not");
  EXPECT_EQ(only_call([&] { return isnan(x); }), "unary isnan");
  EXPECT_EQ(only_call([&] { return isfinite(x); }), "unary isfinite");
  EXPECT_EQ(only_call([&] { return sub(x, local); }), "binary sub");
  EXPECT_EQ(only_call([&] { return maximum(local, y); }), "binary maximum");
  EXPECT_EQ(only_call([&] { return logical_or(b, b); }), "binary logical_or");
  EXPECT_EQ(only_call([&] { return add(x, 2.5); }), "binary_scalar add 2.5");
  EXPECT_EQ(only_call([&] { return minimum(x, -1.0); }), "binary_scalar minimum -1");
  EXPECT_EQ(only_call([&] { return gt(x, 0.0); }), "binary gt");  // comparisons keep the scalar operand
  EXPECT_EQ(only_call([&] { return where(b, x, y); }), "where bool");
  EXPECT_EQ(only_call([&] { return cast(x, DType::bf16); }), "cast bfloat16");
  EXPECT_EQ(only_call([&] { return sum(x, {"embed"}); }), "reduce sum embed");
  EXPECT_EQ(only_call([&] { return max(x, {"batch", "embed"}); }), "reduce max batch,embed");
  EXPECT_EQ(only_call([&] { return min(x); }), "reduce min batch,embed");
  EXPECT_EQ(only_call([&] { return mean(x, {"batch"}); }), "mean batch");
  EXPECT_EQ(only_call([&] { return logsumexp(x, {"embed"}); }), "logsumexp embed");
  EXPECT_EQ(only_call([&] { return softmax(x, "embed"); }), "softmax embed");
  EXPECT_EQ(only_call([&] { return log_softmax(x, "embed"); }), "softmax embed log");
  EXPECT_EQ(only_call([&] { return argmax(x, "embed"); }), "argmax embed");
  EXPECT_EQ(only_call([&] { return cumsum(x, "batch", true, false); }), "cumsum batch 10");
  EXPECT_EQ(only_call([&] { return cumsum(x, "embed", false, true); }), "cumsum embed 01");
  // einsum hands over the operands before its one-operand sums.
  const Array w = Array::ones(Shape{{"embed", 2}, {"mlp", 3}, {"extra", 2}});
  EXPECT_EQ(only_call([&] { return einsum(x, w, {"batch", "mlp"}); }), "einsum batch,embed embed,mlp,extra batch,mlp");
  EXPECT_EQ(only_call([&] { return one_hot(ids, 5, "vocab", DType::bf16); }), "one_hot 5 vocab bfloat16");
  EXPECT_EQ(only_call([&] { return take(Array::ones(Shape{{"vocab", 3}, {"embed", 2}}), ids, "vocab"); }), "take vocab");
  EXPECT_EQ(only_call([&] { return top_k(x, 1, "embed").first; }), "top_k 1 embed");
  EXPECT_EQ(only_call([&] { return transpose(x, {"embed", "batch"}); }), "transpose embed,batch");
  EXPECT_EQ(only_call([&] { return rename(x, {{"embed", "mlp"}}); }), "rename embed=mlp;");
  const Shape r{{"batch", 4}, {"h", 2}, {"k", 1}}, wide{{"batch", 4}, {"embed", 2}, {"mlp", 3}};
  EXPECT_EQ(only_call([&] { return reshape(x, r); }), "reshape " + r.to_string());
  EXPECT_EQ(only_call([&] { return broadcast_to(x, wide); }), "broadcast_to " + wide.to_string());
  EXPECT_EQ(only_call([&] { return slice(x, "batch", 1, 2); }), "slice batch 1 2");
  EXPECT_EQ(only_call([&] { return pad(x, "embed", 1, 3, 0.5); }), "pad embed 1 3 0.5");
  EXPECT_EQ(only_call([&] { return concat({x, local}, "embed"); }), "concat 2 embed");
  EXPECT_EQ(only_call([&] { return stack({x, y, x}, "layers", 1); }), "stack 3 layers 1");
  EXPECT_EQ(only_call([&] { return expand_dims(x, "one", 0); }), "expand_dims one 0");
  EXPECT_EQ(only_call([&] { return squeeze(split_rows(Shape{{"batch", 4}, {"one", 1}}), "one"); }), "squeeze one");
  EXPECT_EQ(only_call([&] { return dynamic_slice(x, {{"batch", 1}}, {{"batch", 2}}); }),
            "dynamic_slice batch=1; batch=2;");
  EXPECT_EQ(only_call([&] { return dynamic_update_slice(x, Array::ones(Shape{{"batch", 1}, {"embed", 2}}), {{"batch", 3}}); }),
            "dynamic_update_slice batch=3;");
  EXPECT_EQ(only_call([&] { return rms_norm(x, Array::ones(Shape{{"embed", 2}}), "embed", 0.25); }), "rms_norm embed 0.25");
  EXPECT_EQ(only_call([&] {
              CrossEntropy c = softmax_cross_entropy_with_integer_labels(x, ids, 0.5, 0.25, "embed");
              EXPECT_EQ(c.z_loss.item(), 9.0);
              return c.loss;
            }),
            "softmax_cross_entropy 0.5 0.25 embed");
  EXPECT_EQ(only_call([&] { return gated_gelu(x, y); }), "gated_gelu");
  EXPECT_EQ(only_call([&] { return fourier_mix(x, "batch", "embed"); }), "fourier_mix batch embed");
  // Attention lowers when only an option's array is split.
  const Shape qs{{"batch", 4}, {"length", 2}, {"heads", 1}, {"kv", 2}};
  const Shape ks{{"batch", 4}, {"kv_length", 2}, {"heads", 1}, {"kv", 2}};
  AttentionOptions o;
  o.causal = true;
  o.scale = 0.5;
  o.kv_mask = split_rows(Shape{{"batch", 4}, {"kv_length", 2}}, DType::boolean);
  EXPECT_EQ(only_call([&] { return dot_product_attention(Array::ones(qs), Array::ones(ks), Array::ones(ks), o); }),
            "attention causal " + std::to_string(0.5) + " kv_mask");
}

TEST_F(TypedLowering, FullyLocalInputsRunTheLocalKernels) {
  RecordingLowering rec;
  LoweringScope scope(&rec);
  Array x = Array::from_floats(Shape{{"batch", 2}}, {1.f, 2.f});
  EXPECT_NEAR(sum(mul(exp(x), 2.0)).item(), 2 * (std::exp(1.0) + std::exp(2.0)), 1e-5);
  EXPECT_EQ(mean(stack({x, x}, "layers", 0)).item(), 1.5);
  EXPECT_TRUE(rec.calls.empty()) << join(rec.calls);
}

TEST_F(TypedLowering, WithoutALoweringSplitInputsAreRefusedByName) {
  const Array x = split_rows(Shape{{"batch", 4}, {"embed", 2}});
  for (const auto& [op, f] : std::vector<std::pair<std::string, std::function<Array()>>>{
           {"tanh", [&] { return tanh(x); }},
           {"einsum", [&] { return einsum(x, Array::ones(Shape{{"embed", 2}}), {"batch"}); }},
           {"stack", [&] { return stack({x, x}, "layers"); }}}) {
    try {
      f();
      ADD_FAILURE() << op << ": no error";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("[" + op + "] sharded inputs not supported yet"), std::string::npos)
          << e.what();
    }
  }
}

// A primitive with a forward and vjp but no sharded rule.
class NoRule : public Primitive {
 public:
  const char* name() const override { return "no_rule"; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {in[0].copy()}; }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {cot[0]};
  }
};

TEST_F(TypedLowering, APrimitiveWithoutLowerNamesTheOp) {
  RecordingLowering rec;
  LoweringScope scope(&rec);
  // Fully local: the primitive runs as usual.
  Array local = Array::from_floats(Shape{{"batch", 2}}, {3.f, 4.f});
  EXPECT_EQ(apply1(std::make_shared<NoRule>(), {local}).to_floats(), (std::vector<float>{3.f, 4.f}));
  try {
    apply1(std::make_shared<NoRule>(), {split_rows(Shape{{"batch", 4}})});
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[no_rule] no sharded lowering for op 'no_rule'; reshard its inputs to replicated first");
  }
  EXPECT_TRUE(rec.calls.empty());
}

TEST_F(TypedLowering, ScopesRestoreThePreviousLowering) {
  RecordingLowering outer, inner;
  const Array x = split_rows(Shape{{"batch", 4}});
  {
    LoweringScope a(&outer);
    EXPECT_EQ(sharded_lowering(), &outer);
    {
      LoweringScope b(&inner);
      EXPECT_EQ(sharded_lowering(), &inner);
      neg(x);
      {
        LoweringScope none(nullptr);  // a scope may also remove the lowering
        EXPECT_EQ(sharded_lowering(), nullptr);
        EXPECT_THROW(neg(x), std::invalid_argument);
      }
      EXPECT_EQ(sharded_lowering(), &inner);
    }
    EXPECT_EQ(sharded_lowering(), &outer);
    // Restored on unwinding too.
    try {
      LoweringScope b(&inner);
      throw std::runtime_error("unwind");
    } catch (const std::runtime_error&) {
    }
    EXPECT_EQ(sharded_lowering(), &outer);
    square(x);
  }
  EXPECT_EQ(sharded_lowering(), nullptr);
  EXPECT_EQ(inner.calls, (std::vector<std::string>{"unary neg"}));
  EXPECT_EQ(outer.calls, (std::vector<std::string>{"unary square"}));
}

}  // namespace
}  // namespace t5x
