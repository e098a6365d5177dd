// Device memory for array buffers, per device, with a live-bytes counter.
//
// Every Buffer comes from the Allocator of its Device: the CPU's is 64-byte
// aligned host memory (aligned_alloc); the CUDA one is the CUDA backend's
// (src/backend/no_cuda in a build without CUDA, whose allocate() throws
// std::invalid_argument("[Buffer] cannot allocate on cuda:0: this build has
// no CUDA backend")). Host reads go through Buffer::copy_to_host (a memcpy on
// the CPU, a device-to-host copy on a GPU); Array::to_host() is built on it.
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
  virtual void deallocate(void* ptr) = 0;
  // Copies `bytes` from `src` (this device's memory) to host memory `dst`.
  virtual void copy_to_host(const void* src, void* dst, size_t bytes) = 0;
};

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
