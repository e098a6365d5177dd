// Host memory for array buffers: 64-byte aligned, with a live-bytes counter.
//
// The counter lets tests prove that autodiff frees activations during the
// backward pass and that remat stores less (tests/ops/autodiff_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace t5x {

// One contiguous, 64-byte aligned block (zero-filled when `zero`).
class Buffer {
 public:
  explicit Buffer(size_t bytes, bool zero = true);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() { return ptr_; }
  const void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

std::shared_ptr<Buffer> allocate_buffer(size_t bytes, bool zero = true);

// Bytes held by live Buffers in this process, and the high-water mark since
// the last reset_peak_bytes().
int64_t live_bytes();
int64_t peak_bytes();
void reset_peak_bytes();

}  // namespace t5x
