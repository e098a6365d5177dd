// The CPU allocator's buffer cache (core/allocator.h): a freed block of a
// cached size class is handed out again (same address, zero-filled when
// asked), small blocks are not kept, the limit evicts the least recently
// cached blocks, and a malformed T5X_CPU_BUFFER_CACHE_MIB is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/allocator.h"

namespace t5x {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// Restores the limit a test changed (gtest may run several tests in one process).
struct LimitGuard {
  size_t saved = cpu_allocator().cache_limit();
  ~LimitGuard() { cpu_allocator().set_cache_limit(saved); }
};

bool all_zero(const Buffer& b) {
  const auto* p = static_cast<const unsigned char*>(b.data());
  for (size_t i = 0; i < b.bytes(); ++i)
    if (p[i]) return false;
  return true;
}

TEST(CpuBufferCache, FreedBlockIsReusedForItsSizeClassAndZeroFilled) {
  LimitGuard g;
  Allocator& a = cpu_allocator();
  a.set_cache_limit(64 * kMiB);
  a.clear_cache();
  void* first = nullptr;
  {
    Buffer b(3 * kMiB + 12345, /*zero=*/true);
    first = b.data();
    EXPECT_TRUE(all_zero(b));
    std::memset(b.data(), 0x5a, b.bytes());
  }
  const size_t cached = a.cached_bytes();
  EXPECT_GE(cached, 3 * kMiB + 12345);
  // A different request of the same class takes the block back, zeroed,
  // without a new mapping.
  const size_t mapped = a.mapped_blocks();
  Buffer again(3 * kMiB + 4096, /*zero=*/true);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(a.mapped_blocks(), mapped);
  EXPECT_EQ(a.cached_bytes(), 0u);
  EXPECT_TRUE(all_zero(again));
  // Without zero it keeps the old contents (no wasted memset).
  void* p2 = nullptr;
  { Buffer c(5 * kMiB, /*zero=*/false); p2 = c.data(); std::memset(c.data(), 0x11, c.bytes()); }
  Buffer d(5 * kMiB, /*zero=*/false);
  EXPECT_EQ(d.data(), p2);
  EXPECT_EQ(static_cast<unsigned char*>(d.data())[100], 0x11);
}

TEST(CpuBufferCache, SizeClassesWasteAtMostAnEighthAndAlign) {
  LimitGuard g;
  Allocator& a = cpu_allocator();
  a.set_cache_limit(1024 * kMiB);
  for (size_t bytes : {kCachedMinBytes, kCachedMinBytes + 1, size_t(300000), kMiB + 1, 2 * kMiB - 64, 2 * kMiB,
                       17 * kMiB + 3, size_t(32128) * 512 * 4, size_t(100) * kMiB + 7}) {
    a.clear_cache();
    uintptr_t addr = 0;
    {
      Buffer b(bytes, false);
      addr = reinterpret_cast<uintptr_t>(b.data());
    }
    const size_t cls = a.cached_bytes();
    EXPECT_GE(cls, bytes) << bytes;
    // 8 classes per power of two; from 2 MiB up also whole 2 MiB pages.
    EXPECT_LE(double(cls), bytes >= 2 * kMiB && bytes < 16 * kMiB ? double(bytes) + double(2 * kMiB)
                                                                    : double(bytes) * 1.125 + 4096)
        << bytes;
    EXPECT_EQ(addr % 64, 0u) << bytes;
    if (bytes >= 2 * kMiB) {
      EXPECT_EQ(addr % (2 * kMiB), 0u) << "huge-page blocks are 2 MiB aligned: " << bytes;
    }
  }
}

TEST(CpuBufferCache, SmallBlocksAreNotCached) {
  cpu_allocator().clear_cache();
  { Buffer b(kCachedMinBytes - 1); }
  { Buffer b(1000); }
  EXPECT_EQ(cpu_allocator().cached_bytes(), 0u);
}

TEST(CpuBufferCache, LimitEvictsTheLeastRecentlyCached) {
  LimitGuard g;
  Allocator& a = cpu_allocator();
  a.clear_cache();
  a.set_cache_limit(3 * kMiB);  // three 1 MiB blocks
  void* p[4];
  {
    Buffer b0(kMiB, false), b1(kMiB, false), b2(kMiB, false), b3(kMiB, false);
    p[0] = b0.data(), p[1] = b1.data(), p[2] = b2.data(), p[3] = b3.data();
  }  // freed b3, b2, b1, b0 in that order: b3 is the oldest, evicted
  EXPECT_EQ(a.cached_bytes(), 3 * kMiB);
  // The most recently cached comes back first; the evicted one is mapped anew.
  Buffer x(kMiB, false), y(kMiB, false), z(kMiB, false);
  EXPECT_EQ(x.data(), p[0]);
  EXPECT_EQ(y.data(), p[1]);
  EXPECT_EQ(z.data(), p[2]);
  EXPECT_EQ(a.cached_bytes(), 0u);
  const size_t mapped = a.mapped_blocks();
  { Buffer w(kMiB, false); }
  EXPECT_EQ(a.mapped_blocks(), mapped + 1);
  EXPECT_EQ(a.cached_bytes(), kMiB);  // w, cached
  // A block larger than the limit is released, and limit 0 keeps nothing.
  { Buffer big(8 * kMiB, false); }
  EXPECT_EQ(a.cached_bytes(), kMiB);
  a.set_cache_limit(0);
  { Buffer b(kMiB, false); }
  EXPECT_EQ(a.cached_bytes(), 0u);
  // Lowering the limit releases down to it.
  a.set_cache_limit(8 * kMiB);
  { Buffer b0(kMiB, false), b1(2 * kMiB, false); }
  EXPECT_EQ(a.cached_bytes(), 3 * kMiB);
  a.set_cache_limit(2 * kMiB);
  EXPECT_LE(a.cached_bytes(), 2 * kMiB);
  a.clear_cache();
  EXPECT_EQ(a.cached_bytes(), 0u);
}

TEST(CpuBufferCache, LiveBytesCountRequestsNotClasses) {
  const int64_t before = live_bytes();
  {
    Buffer b(kMiB + 1);
    EXPECT_EQ(live_bytes() - before, int64_t(kMiB + 1));
  }
  EXPECT_EQ(live_bytes(), before);
}

// The limit is read when the first buffer is allocated; in a fresh process
// (the death-test child re-runs this test alone) a malformed value is refused.
TEST(CpuBufferCacheDeathTest, MalformedLimitIsRefusedWithTheVariableNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("T5X_CPU_BUFFER_CACHE_MIB", "lots", 1);
        try {
          Buffer b(16);
        } catch (const std::invalid_argument& e) {
          std::fputs(e.what(), stderr);
          std::_Exit(3);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(3), "T5X_CPU_BUFFER_CACHE_MIB=lots is not a number of MiB \\(use 0 to turn");
}

}  // namespace
}  // namespace t5x
