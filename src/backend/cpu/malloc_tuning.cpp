#include "backend/cpu/malloc_tuning.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace t5x::cpu {

bool retain_freed_memory(long trim_mib) {
#if defined(__GLIBC__)
  // 32 MiB is glibc's largest accepted mmap threshold on 64-bit (larger
  // blocks, e.g. [256, 32128] f32 logits, are still mmapped).
  bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, int(trim_mib << 20)) == 1 && ok;
  return ok;
#else
  (void)trim_mib;
  return true;
#endif
}

}  // namespace t5x::cpu
