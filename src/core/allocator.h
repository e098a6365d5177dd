// Device memory for array buffers, per device, with a live-bytes counter.
//
// Every Buffer comes from the Allocator of its Device: the CPU's is 64-byte
// aligned host memory with a buffer cache (below); the CUDA one is the CUDA
// backend's (src/backend/no_cuda in a build without CUDA, whose allocate() throws
// std::invalid_argument("[Buffer] cannot allocate on cuda:0: this build has
// no CUDA backend")). Host reads go through Buffer::copy_to_host (a memcpy on
// the CPU, a device-to-host copy on a GPU); Array::to_host() is built on it.
//
// The CPU allocator's buffer cache (as MLX's Metal allocator and XLA's BFC
// allocator keep device memory): a freed block of at least kCachedMinBytes
// is kept, and the next request of its size class takes it back, so a
// training or decode step that repeats the previous step's shapes allocates
// nothing and touches no new pages. A new page costs a kernel fault and a
// zeroing, which on a virtual machine ran at ~20 us per 4 KiB page here (a
// 64 MiB embedding gradient freshly mapped: 76-126 ms; reused: 2-3 ms).
// Cached blocks are their own mappings (mmap), 2 MiB aligned and marked for
// transparent huge pages from 2 MiB up, so an evicted block goes back to the
// OS at once. Size classes: 8 per power of two, whole 2 MiB pages from
// 2 MiB up (at most 12.5% unused, but up to 2 MiB between 2 and 16 MiB).
// Limit: T5X_CPU_BUFFER_CACHE_MIB (0 turns the cache off), by default a
// quarter of physical memory or of a smaller cgroup (v2) limit; past it the
// least recently cached blocks are released. Smaller blocks come from the C
// library's heap, and so does every block under AddressSanitizer (which then
// watches them all; nothing is cached).
//
// The counter lets tests prove that autodiff frees activations during the
// backward pass and that remat stores less (tests/ops/autodiff_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace t5x {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // At least `bytes` (64-byte aligned), zero-filled when `zero`; never null
  // (throws std::bad_alloc, or std::invalid_argument for a missing device).
  virtual void* allocate(size_t bytes, bool zero) = 0;
  // `ptr` from allocate(bytes, ...) with the same `bytes`.
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  // Copies `bytes` from `src` (this device's memory) to host memory `dst`.
  virtual void copy_to_host(const void* src, void* dst, size_t bytes) = 0;
  // Bytes of freed blocks kept for reuse, the cap on them (0: no cache), and
  // their release. An allocator without a cache keeps the defaults.
  virtual size_t cached_bytes() const { return 0; }
  // Blocks taken from the OS so far (new mappings); a cache hit is not one.
  virtual size_t mapped_blocks() const { return 0; }
  virtual size_t cache_limit() const { return 0; }
  virtual void set_cache_limit(size_t /*bytes*/) {}
  virtual void clear_cache() {}
};

// Requests of at least this many bytes are cached by the CPU allocator.
inline constexpr size_t kCachedMinBytes = size_t(256) << 10;

// The allocator of host memory, and of CUDA device memory (defined by the
// CUDA backend library, t5x_backend_cuda: the no_cuda stub without CUDA).
Allocator& cpu_allocator();
Allocator& cuda_allocator();
Allocator& allocator_for(const Device& device);

// One contiguous, 64-byte aligned block on `device` (zero-filled when `zero`).
class Buffer {
 public:
  explicit Buffer(size_t bytes, bool zero = true, Device device = {});
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  // The block's address in its device's memory (a host pointer on the CPU).
  void* data() { return ptr_; }
  const void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }
  // Copies the first `bytes` of the block to host memory `dst`.
  void copy_to_host(void* dst, size_t bytes) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  Allocator* alloc_ = nullptr;
};

std::shared_ptr<Buffer> allocate_buffer(size_t bytes, bool zero = true, Device device = {});

// Bytes held by live Buffers in this process (every device), and the
// high-water mark since the last reset_peak_bytes().
int64_t live_bytes();
int64_t peak_bytes();
void reset_peak_bytes();

}  // namespace t5x
