// retain_freed_memory must really change glibc's settings: a buffer the size
// of T5.1.1's embedding gradient ([32128, 512] f32, 63 MiB) then comes from
// the heap, not from mmap, and a freed one is handed out again without
// going back to the kernel (no fresh zeroed pages per training step).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "backend/cpu/malloc_tuning.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace t5x::cpu {
namespace {

TEST(MallocTuning, LargeBuffersComeFromTheHeapAndAreReused) {
#if !defined(__GLIBC__)
  FAIL() << "retain_freed_memory targets glibc; this C library is not glibc";
#else
  ASSERT_TRUE(retain_freed_memory());
  const size_t bytes = size_t(32128) * 512 * sizeof(float);
  void* a = std::aligned_alloc(64, bytes);
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, bytes);
  struct mallinfo2 held = mallinfo2();
  EXPECT_EQ(held.hblks, 0u) << "a 63 MiB buffer was mmapped: M_MMAP_MAX = 0 did not take effect";
  EXPECT_EQ(held.hblkhd, 0u);
  EXPECT_GE(held.uordblks, bytes) << "the buffer is not counted in the heap's allocated bytes";
  std::free(a);
  // Freed, it stays in the heap (trim threshold 1 GiB) ...
  EXPECT_GE(mallinfo2().arena, bytes);
  // ... and the same size is served from it again.
  void* b = std::aligned_alloc(64, bytes);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(mallinfo2().hblks, 0u);
  std::free(b);
#endif
}

}  // namespace
}  // namespace t5x::cpu
