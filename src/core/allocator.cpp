#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace t5x {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

// Host memory: 64-byte aligned blocks.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes, bool zero) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    if (zero) std::memset(p, 0, rounded);
    return p;
  }
  void deallocate(void* ptr) override { std::free(ptr); }
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
};
}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator a;
  return a;
}

Allocator& allocator_for(const Device& device) {
  return device.kind == DeviceKind::cuda ? cuda_allocator() : cpu_allocator();
}

Buffer::Buffer(size_t bytes, bool zero, Device device) : bytes_(bytes), device_(device) {
  alloc_ = &allocator_for(device);
  ptr_ = alloc_->allocate(bytes, zero);
  int64_t now = g_live.fetch_add(int64_t(bytes)) + int64_t(bytes);
  int64_t p = g_peak.load();
  while (now > p && !g_peak.compare_exchange_weak(p, now)) {}
}

Buffer::~Buffer() {
  alloc_->deallocate(ptr_);
  g_live.fetch_sub(int64_t(bytes_));
}

void Buffer::copy_to_host(void* dst, size_t bytes) const { alloc_->copy_to_host(ptr_, dst, bytes); }

std::shared_ptr<Buffer> allocate_buffer(size_t bytes, bool zero, Device device) {
  return std::make_shared<Buffer>(bytes, zero, device);
}

int64_t live_bytes() { return g_live.load(); }
int64_t peak_bytes() { return g_peak.load(); }
void reset_peak_bytes() { g_peak.store(g_live.load()); }

}  // namespace t5x
