// The CUDA backend's entry points in a build without CUDA (see
// backend/device.h): nothing runs on a CUDA device. Primitives need no stub
// each: Primitive::eval_cuda() throws "[op] has no CUDA kernel in this build".
// Self-contained (no t5x_core symbols): t5x_core links this library.
#include <stdexcept>
#include <string>

#include "backend/device.h"
#include "core/allocator.h"

namespace t5x {
namespace backend {

bool cuda_available() { return false; }

}  // namespace backend

namespace {
// Refuses every allocation: no buffer can exist on a CUDA device.
class NoCudaAllocator final : public Allocator {
 public:
  void* allocate(size_t, bool) override {
    throw std::invalid_argument("[Buffer] cannot allocate on a CUDA device: this build has no CUDA backend");
  }
  void deallocate(void*, size_t) override {}
  void copy_to_host(const void*, void*, size_t) override {
    throw std::invalid_argument("[Buffer] no CUDA device memory in this build");
  }
};
}  // namespace

Allocator& cuda_allocator() {
  static NoCudaAllocator a;
  return a;
}

}  // namespace t5x
