#include "spmd/dispatch.h"

#include <functional>
#include <map>

#include "core/error.h"
#include "ops/elementwise.h"
#include "spmd/einsum.h"
#include "spmd/elementwise.h"
#include "spmd/fused.h"
#include "spmd/shape_ops.h"
#include "spmd/index.h"
#include "spmd/reduce.h"
#include "spmd/reshard.h"

namespace t5x::spmd {
namespace {

using Unary = Array (*)(const Array&);
const std::map<std::string_view, Unary>& unary_ops() {
  static const std::map<std::string_view, Unary> m = {
      {"neg", t5x::neg},     {"abs", t5x::abs},         {"sign", t5x::sign},       {"square", t5x::square},
      {"exp", t5x::exp},     {"log", t5x::log},         {"tanh", t5x::tanh},       {"sqrt", t5x::sqrt},
      {"rsqrt", t5x::rsqrt}, {"sigmoid", t5x::sigmoid}, {"relu", t5x::relu},       {"gelu", t5x::gelu},
      {"isnan", t5x::isnan}, {"isfinite", t5x::isfinite}, {"logical_not", t5x::logical_not}};
  return m;
}

using ScalarFn = Array (*)(const Array&, double);
const std::map<std::string_view, ScalarFn>& scalar_ops() {
  static const std::map<std::string_view, ScalarFn> m = {
      {"add_scalar", t5x::add},         {"sub_scalar", t5x::sub},         {"mul_scalar", t5x::mul},
      {"div_scalar", t5x::div},         {"maximum_scalar", t5x::maximum}, {"minimum_scalar", t5x::minimum}};
  return m;
}

using Binary = Array (*)(const Array&, const Array&);
const std::map<std::string_view, Binary>& compare_ops() {
  static const std::map<std::string_view, Binary> m = {
      {"eq", t5x::eq}, {"ne", t5x::ne}, {"lt", t5x::lt}, {"le", t5x::le}, {"gt", t5x::gt}, {"ge", t5x::ge},
      {"logical_and", t5x::logical_and}, {"logical_or", t5x::logical_or}};
  return m;
}

void need(std::string_view op, const std::vector<Array>& in, size_t n) {
  if (in.size() != n)
    throw_invalid("spmd", "op '" + std::string(op) + "' expects " + std::to_string(n) + " inputs, got " +
                              std::to_string(in.size()));
}

}  // namespace

std::vector<Array> dispatch(std::string_view op, const std::vector<Array>& in, const OpArgs& args) {
  if (auto it = unary_ops().find(op); it != unary_ops().end()) {
    need(op, in, 1);
    return {spmd::unary(in[0], it->second)};
  }
  if (auto it = scalar_ops().find(op); it != scalar_ops().end()) {
    need(op, in, 1);
    ScalarFn f = it->second;
    double s = args.scalar;
    return {spmd::unary(in[0], [f, s](const Array& v) { return f(v, s); })};
  }
  if (op == "cast") {
    need(op, in, 1);
    DType dt = args.dtype;
    return {spmd::unary(in[0], [dt](const Array& v) { return t5x::cast(v, dt); })};
  }
  if (op == "add") return need(op, in, 2), std::vector<Array>{spmd::add(in[0], in[1])};
  if (op == "sub") return need(op, in, 2), std::vector<Array>{spmd::sub(in[0], in[1])};
  if (op == "mul") return need(op, in, 2), std::vector<Array>{spmd::mul(in[0], in[1])};
  if (op == "div") return need(op, in, 2), std::vector<Array>{spmd::div(in[0], in[1])};
  if (op == "maximum") return need(op, in, 2), std::vector<Array>{spmd::maximum(in[0], in[1])};
  if (op == "minimum") return need(op, in, 2), std::vector<Array>{spmd::minimum(in[0], in[1])};
  if (op == "where") return need(op, in, 3), std::vector<Array>{spmd::where(in[0], in[1], in[2])};
  // Comparisons and logical ops: slicewise, not differentiable (bool out).
  if (auto it = compare_ops().find(op); it != compare_ops().end()) {
    need(op, in, 2);
    Binary f = it->second;
    return {spmd::elementwise(it->first.data(), in, [f](const std::vector<Array>& v) { return f(v[0], v[1]); })};
  }
  if (op == "gated_gelu") {
    need(op, in, 2);
    return {spmd::elementwise("gated_gelu", in, [](const std::vector<Array>& v) { return t5x::gated_gelu(v[0], v[1]); })};
  }
  if (op == "rename") {
    need(op, in, 1);
    if (args.dims.size() % 2 != 0) throw_invalid("spmd", "op 'rename' expects dims = {from, to, from, to, ...}");
    std::map<std::string, std::string> m;
    for (size_t i = 0; i < args.dims.size(); i += 2) m[args.dims[i]] = args.dims[i + 1];
    return {spmd::rename(in[0], m)};
  }
  if (op == "sum") return need(op, in, 1), std::vector<Array>{spmd::sum(in[0], args.dims)};
  if (op == "mean") return need(op, in, 1), std::vector<Array>{spmd::mean(in[0], args.dims)};
  if (op == "max") return need(op, in, 1), std::vector<Array>{spmd::max(in[0], args.dims)};
  if (op == "min") return need(op, in, 1), std::vector<Array>{spmd::min(in[0], args.dims)};
  if (op == "logsumexp") return need(op, in, 1), std::vector<Array>{spmd::logsumexp(in[0], args.dims)};
  if (op == "softmax") return need(op, in, 1), std::vector<Array>{spmd::softmax(in[0], args.dim)};
  if (op == "log_softmax") return need(op, in, 1), std::vector<Array>{spmd::log_softmax(in[0], args.dim)};
  if (op == "einsum") return need(op, in, 2), std::vector<Array>{spmd::einsum(in[0], in[1], args.dims)};
  if (op == "one_hot") return need(op, in, 1), std::vector<Array>{spmd::one_hot(in[0], args.k, args.name, args.dims, args.dtype)};
  if (op == "take") return need(op, in, 2), std::vector<Array>{spmd::take(in[0], in[1], args.dim)};
  if (op == "top_k") {
    need(op, in, 1);
    auto [v, i] = spmd::top_k(in[0], args.k, args.dim);
    return {v, i};
  }
  auto ints = [&](size_t n) {
    if (args.ints.size() != n)
      throw_invalid("spmd", "op '" + std::string(op) + "' expects " + std::to_string(n) + " ints in OpArgs");
  };
  if (op == "argmax") return need(op, in, 1), std::vector<Array>{spmd::argmax(in[0], args.dim)};
  if (op == "cumsum") {
    need(op, in, 1), ints(2);
    return {spmd::cumsum(in[0], args.dim, args.ints[0] != 0, args.ints[1] != 0)};
  }
  if (op == "transpose") return need(op, in, 1), std::vector<Array>{spmd::transpose(in[0], args.dims)};
  if (op == "reshape") return need(op, in, 1), std::vector<Array>{spmd::reshape(in[0], args.shape)};
  if (op == "broadcast_to") return need(op, in, 1), std::vector<Array>{spmd::broadcast_to(in[0], args.shape)};
  if (op == "slice") return need(op, in, 1), ints(2), std::vector<Array>{spmd::slice(in[0], args.dim, args.ints[0], args.ints[1])};
  if (op == "pad")
    return need(op, in, 1), ints(2), std::vector<Array>{spmd::pad(in[0], args.dim, args.ints[0], args.ints[1], args.scalar)};
  if (op == "concat") return {spmd::concat(in, args.dim)};
  if (op == "stack") return {spmd::stack(in, args.name, int(args.k))};
  if (op == "expand_dims") return need(op, in, 1), std::vector<Array>{spmd::expand_dims(in[0], args.name, int(args.k))};
  if (op == "squeeze") return need(op, in, 1), std::vector<Array>{spmd::squeeze(in[0], args.name)};
  if (op == "dynamic_slice") return need(op, in, 1), std::vector<Array>{spmd::dynamic_slice(in[0], args.starts, args.sizes)};
  if (op == "dynamic_update_slice")
    return need(op, in, 2), std::vector<Array>{spmd::dynamic_update_slice(in[0], in[1], args.starts)};
  if (op == "rms_norm") return need(op, in, 2), std::vector<Array>{spmd::rms_norm(in[0], in[1], args.dim, args.scalar)};
  if (op == "softmax_cross_entropy_with_integer_labels") {
    need(op, in, 2);
    CrossEntropy r = spmd::softmax_cross_entropy_with_integer_labels(in[0], in[1], args.scalar, args.scalar2, args.dim);
    return {r.loss, r.z_loss};
  }
  if (op == "dot_product_attention") {
    need(op, in, 3);
    return {spmd::dot_product_attention(in[0], in[1], in[2], args.attention ? *args.attention : AttentionOptions{})};
  }
  throw_invalid("spmd", "no sharded lowering for op '" + std::string(op) + "'; reshard its inputs to replicated first");
}

void install() { t5x::set_sharded_dispatch(&dispatch); }
bool installed() { return t5x::sharded_dispatch() == &dispatch; }

}  // namespace t5x::spmd
