#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace t5x {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
}  // namespace

Buffer::Buffer(size_t bytes, bool zero) : bytes_(bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  ptr_ = std::aligned_alloc(64, rounded);
  if (!ptr_) throw std::bad_alloc();
  if (zero) std::memset(ptr_, 0, rounded);
  int64_t now = g_live.fetch_add(int64_t(bytes)) + int64_t(bytes);
  int64_t p = g_peak.load();
  while (now > p && !g_peak.compare_exchange_weak(p, now)) {}
}

Buffer::~Buffer() {
  std::free(ptr_);
  g_live.fetch_sub(int64_t(bytes_));
}

std::shared_ptr<Buffer> allocate_buffer(size_t bytes, bool zero) {
  return std::make_shared<Buffer>(bytes, zero);
}

int64_t live_bytes() { return g_live.load(); }
int64_t peak_bytes() { return g_peak.load(); }
void reset_peak_bytes() { g_peak.store(g_live.load()); }

}  // namespace t5x
