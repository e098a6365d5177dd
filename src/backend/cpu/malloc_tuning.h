// Keeps freed activation buffers in the process heap instead of returning
// them to the kernel.
//
// glibc serves blocks above M_MMAP_THRESHOLD (128 KiB, adapting up to
// 32 MiB) with mmap and unmaps them on free, so every large op output of a
// training step faults in fresh zeroed pages: about 0.5 s per T5.1.1-small
// step here (kernel clear_page + page-fault time). Turning mmap off
// (M_MMAP_MAX = 0) and raising the trim threshold to `trim_mib` lets freed
// blocks be reused by the next step. Peak RSS stays about the same (the heap stops
// growing at the step's peak); memory is not returned to the OS until exit.
// Call once at start-up (the benchmark and training binaries); a no-op on
// other C libraries, and where jemalloc serves malloc (the t5x and seqio
// programs and the model benchmark link it: cmake/t5x_helpers.cmake), which
// keeps freed extents for reuse itself (its dirty-page decay, 10 s by
// default). Returns false when glibc rejected a setting.
#pragma once

namespace t5x::cpu {

bool retain_freed_memory(long trim_mib = 1024);

// The malloc this process runs on: "jemalloc" (its mallctl entry point is
// loaded), else "glibc" or "other" (for benchmark records).
const char* malloc_in_use();

}  // namespace t5x::cpu
