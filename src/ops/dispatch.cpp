#include "ops/dispatch.h"

#include <atomic>

#include "core/error.h"

namespace t5x {
namespace {
std::atomic<ShardedDispatch> g_dispatch{nullptr};
}  // namespace

void set_sharded_dispatch(ShardedDispatch f) { g_dispatch.store(f, std::memory_order_release); }
ShardedDispatch sharded_dispatch() { return g_dispatch.load(std::memory_order_acquire); }

namespace detail {

std::vector<Array> dispatch_n(std::string_view op, std::vector<Array> inputs, const OpArgs& args, size_t n) {
  ShardedDispatch f = sharded_dispatch();
  if (!f) throw_invalid(std::string(op).c_str(), "no sharded dispatcher installed");
  std::vector<Array> out = f(op, inputs, args);
  if (out.size() < n)
    throw_invalid(std::string(op).c_str(), "sharded dispatcher returned " + std::to_string(out.size()) +
                                               " outputs, expected " + std::to_string(n));
  return out;
}

Array dispatch1(std::string_view op, std::vector<Array> inputs, const OpArgs& args) {
  return dispatch_n(op, std::move(inputs), args, 1)[0];
}

}  // namespace detail
}  // namespace t5x
