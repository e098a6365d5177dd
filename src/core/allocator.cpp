#include "core/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace t5x {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

constexpr size_t kHugePage = size_t(2) << 20;

// Under AddressSanitizer every block comes from the C library's heap, which
// ASan watches (an overflow into a size class's spare bytes, a use after free),
// and nothing is cached.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCache = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCache = false;
#else
constexpr bool kCache = true;
#endif
#else
constexpr bool kCache = true;
#endif

// The size class of a cached request: 8 classes per power of two, and whole
// pages (whole 2 MiB pages from 2 MiB up, so a huge page never spans two
// blocks).
size_t size_class(size_t bytes) {
  const int top = std::bit_width(bytes) - 1;  // bytes >= kCachedMinBytes
  const size_t step = std::max<size_t>(size_t(1) << (top - 3), bytes >= kHugePage ? kHugePage : 4096);
  return (bytes + step - 1) / step * step;
}

size_t default_cache_limit() {
  if (const char* e = std::getenv("T5X_CPU_BUFFER_CACHE_MIB")) {
    char* end = nullptr;
    const long long mib = std::strtoll(e, &end, 10);
    if (end == e || *end != '\0' || mib < 0)
      throw std::invalid_argument(std::string("[Buffer] T5X_CPU_BUFFER_CACHE_MIB=") + e +
                                  " is not a number of MiB (use 0 to turn the CPU buffer cache off)");
    return size_t(mib) << 20;
  }
  // A quarter of the memory this process may use: physical memory, or a
  // smaller cgroup (v2) limit, as in a container.
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  size_t mem = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : size_t(4) << 30;
  if (std::FILE* f = std::fopen("/sys/fs/cgroup/memory.max", "r")) {
    unsigned long long cap = 0;
    if (std::fscanf(f, "%llu", &cap) == 1 && cap > 0 && cap < mem) mem = size_t(cap);  // "max": no limit
    std::fclose(f);
  }
  return mem / 4;
}

// Host memory: 64-byte aligned; blocks of kCachedMinBytes and more are
// mappings of their size class, kept in a cache when freed (allocator.h).
class CpuAllocator final : public Allocator {
 public:
  // The variable is checked in every build, used only where kCache.
  CpuAllocator() : limit_(default_cache_limit()) {
    if (!kCache) limit_ = 0;
  }

  void* allocate(size_t bytes, bool zero) override {
    if (!kCache || bytes < kCachedMinBytes) {
      void* p = heap_alloc(bytes);
      if (zero) std::memset(p, 0, bytes);
      return p;
    }
    auto [p, fresh] = take_or_map(size_class(bytes));
    if (zero && !fresh) std::memset(p, 0, bytes);  // a new mapping reads as zeros already
    return p;
  }
  // Called from ~Buffer (noexcept): a block the cache cannot take (past the
  // limit, or no memory for its bookkeeping) goes back to the OS instead.
  void deallocate(void* ptr, size_t bytes) override {
    if (!kCache || bytes < kCachedMinBytes) return std::free(ptr);
    const size_t cls = size_class(bytes);
    bool cached = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cls <= limit_) {
        try {  // the allocations first: a throw leaves the cache as it was
          std::vector<Lru::iterator>& v = by_class_[cls];
          v.reserve(v.size() + 1);
          lru_.push_back({cls, ptr});
          v.push_back(std::prev(lru_.end()));
          cached_ += cls;
          cached = true;
        } catch (...) {
        }
      }
    }
    if (!cached) return unmap(ptr, cls);
    trim_to(std::numeric_limits<size_t>::max());
  }
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  size_t cached_bytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }
  size_t mapped_blocks() const override { return mapped_.load(); }
  size_t cache_limit() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return limit_;
  }
  void set_cache_limit(size_t bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      limit_ = kCache ? bytes : 0;
    }
    trim_to(std::numeric_limits<size_t>::max());
  }
  void clear_cache() override { trim_to(0); }

 private:
  struct Block {
    size_t bytes;
    void* ptr;
  };
  using Lru = std::list<Block>;

  static void* heap_alloc(size_t bytes) {
    void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    if (!p) throw std::bad_alloc();
    return p;
  }

  // The most recently cached block of class `cls` (likeliest still in the
  // CPU's caches), else a new mapping (fresh: all zeros).
  std::pair<void*, bool> take_or_map(size_t cls) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = by_class_.find(cls);
      if (it != by_class_.end() && !it->second.empty()) {
        Lru::iterator b = it->second.back();
        it->second.pop_back();
        void* p = b->ptr;
        lru_.erase(b);
        cached_ -= cls;
        return {p, false};
      }
    }
    void* p = map(cls);
    if (!p) {
      clear_cache();  // out of address space or memory: give the cache back, then retry once
      p = map(cls);
    }
    if (!p) throw std::bad_alloc();
    mapped_.fetch_add(1);
    return {p, true};
  }

  // A mapping of `cls` bytes; from 2 MiB up, 2 MiB aligned and advised for
  // huge pages (fewer faults and TLB misses on the large activations).
  static void* map(size_t cls) {
    const size_t align = cls >= kHugePage ? kHugePage : 0;
    void* raw = mmap(nullptr, cls + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    if (!align) return raw;
    const uintptr_t start = uintptr_t(raw), aligned = (start + align - 1) / align * align;
    if (aligned > start) munmap(raw, aligned - start);
    if (const size_t tail = start + align - aligned) munmap(reinterpret_cast<void*>(aligned + cls), tail);
#ifdef MADV_HUGEPAGE
    madvise(reinterpret_cast<void*>(aligned), cls, MADV_HUGEPAGE);
#endif
    return reinterpret_cast<void*>(aligned);
  }
  static void unmap(void* p, size_t cls) { munmap(p, cls); }

  // Releases the least recently cached blocks (the oldest of their class)
  // until the cache holds at most min(bytes, limit) bytes; each is unmapped
  // outside the lock.
  void trim_to(size_t bytes) {
    for (;;) {
      Block b;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (cached_ <= std::min(bytes, limit_)) return;
        b = lru_.front();
        std::vector<Lru::iterator>& v = by_class_.find(b.bytes)->second;
        v.erase(v.begin());
        lru_.pop_front();
        cached_ -= b.bytes;
      }
      unmap(b.ptr, b.bytes);
    }
  }

  mutable std::mutex mu_;
  Lru lru_;  // every cached block, oldest first
  std::unordered_map<size_t, std::vector<Lru::iterator>> by_class_;  // the same per class, oldest first
  size_t cached_ = 0;  // bytes in lru_
  std::atomic<size_t> mapped_{0};
  size_t limit_;
};
}  // namespace

Allocator& cpu_allocator() {
  // Never destroyed: arrays held by other statics may be freed after it.
  static CpuAllocator* a = new CpuAllocator;
  return *a;
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
  alloc_->deallocate(ptr_, bytes_);
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
