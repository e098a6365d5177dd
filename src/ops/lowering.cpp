#include "ops/lowering.h"

#include <atomic>
#include <stdexcept>

#include "ops/detail.h"
#include "ops/primitive.h"

namespace t5x {
namespace {
std::atomic<const ShardedLowering*> g_lowering{nullptr};
}  // namespace

const char* op_name(UnaryOp op) {
  static const char* n[] = {"neg", "abs",     "sign", "square", "exp",         "log",   "tanh",    "sqrt",
                            "rsqrt", "sigmoid", "relu", "gelu", "logical_not", "isnan", "isfinite"};
  return n[int(op)];
}
const char* op_name(BinaryOp op) {
  static const char* n[] = {"add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                            "logical_and", "logical_or"};
  return n[int(op)];
}
const char* op_name(Reduction op) {
  static const char* n[] = {"sum", "max", "min"};
  return n[int(op)];
}

const ShardedLowering* sharded_lowering() { return g_lowering.load(std::memory_order_acquire); }
void set_sharded_lowering(const ShardedLowering* lowering) { g_lowering.store(lowering, std::memory_order_release); }

LoweringScope::LoweringScope(const ShardedLowering* lowering) : prev_(sharded_lowering()) {
  set_sharded_lowering(lowering);
}
LoweringScope::~LoweringScope() { set_sharded_lowering(prev_); }

std::vector<Array> Primitive::lower(const ShardedLowering&, const std::vector<Array>&) const {
  throw_invalid(name(), std::string("no sharded lowering for op '") + name() +
                            "'; reshard its inputs to replicated first");
}

std::vector<Array> Composite::vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>&,
                                  const std::vector<bool>&) {
  throw std::logic_error(std::string("[autodiff] the composite op '") + name_ + "' has no vjp of its own");
}

std::vector<Array> apply_composite(const char* name, const std::vector<Array>& inputs, Composite::Expand expand,
                                   Composite::Lower lower) {
  return t5x::apply(std::make_shared<Composite>(name, std::move(expand), std::move(lower)), inputs);
}

namespace detail {
Array composite1(const char* name, const std::vector<Array>& inputs, std::function<Array(const std::vector<Array>&)> expand,
                 std::function<Array(const ShardedLowering&, const std::vector<Array>&)> lower) {
  return apply_composite(
      name, inputs, [&](const std::vector<Array>& in) { return std::vector<Array>{expand(in)}; },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return std::vector<Array>{lower(l, in)}; })[0];
}
}  // namespace detail

}  // namespace t5x
