#include "backend/cpu/malloc_tuning.h"

// <cstdlib> brings in <features.h>, which defines __GLIBC__: without a C
// library header first, the test below was always false and the settings
// were never made (every large buffer of a step was mmapped and faulted in).
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <dlfcn.h>

#include <string_view>

namespace t5x::cpu {

const char* malloc_in_use() {
  if (dlsym(RTLD_DEFAULT, "mallctl")) return "jemalloc";
#if defined(__GLIBC__)
  return "glibc";
#else
  return "other";
#endif
}

bool retain_freed_memory(long trim_mib) {
#if defined(__GLIBC__)
  // jemalloc serves malloc: glibc's settings would tune an allocator no one calls.
  if (std::string_view(malloc_in_use()) == "jemalloc") return true;
  // No mmap at all: glibc caps M_MMAP_THRESHOLD at 32 MiB, and the largest
  // buffers ([256, 32128] f32 logits, the [32128, 512] embedding gradient)
  // are above it. Everything comes from the brk heap and is reused.
  bool ok = mallopt(M_MMAP_MAX, 0) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, int(trim_mib << 20)) == 1 && ok;
  return ok;
#else
  (void)trim_mib;
  return true;
#endif
}

}  // namespace t5x::cpu
