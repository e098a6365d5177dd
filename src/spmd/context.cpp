#include "spmd/context.h"

#include <mutex>

namespace t5x::spmd {
namespace {

std::mutex g_mu;
std::shared_ptr<Context> g_ctx;

std::shared_ptr<Context> default_context() {
  static std::shared_ptr<Context> d =
      std::make_shared<Context>(Mesh({1, 1}, {"data", "model"}, 0), make_single_communicator());
  return d;
}

}  // namespace

Context::Context(const Mesh& mesh, std::shared_ptr<Communicator> world)
    : groups_(std::make_shared<MeshGroups>(mesh.with_device(world->rank()), std::move(world))) {}

std::shared_ptr<Context> Context::create(std::vector<int64_t> axis_sizes, std::vector<std::string> axis_names) {
  auto world = init_communicator(CommBackend::kAny);
  Mesh mesh = Mesh::for_processes(std::move(axis_sizes), world->size(), world->rank(), std::move(axis_names));
  return std::make_shared<Context>(mesh, world);
}

std::shared_ptr<Context> context_ptr() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_ctx ? g_ctx : default_context();
}

Context& context() { return *context_ptr(); }

void set_context(std::shared_ptr<Context> ctx) {
  std::lock_guard<std::mutex> l(g_mu);
  g_ctx = std::move(ctx);
}

ContextScope::ContextScope(std::shared_ptr<Context> ctx) : prev_(context_ptr()) { set_context(std::move(ctx)); }
ContextScope::~ContextScope() { set_context(prev_); }

}  // namespace t5x::spmd
