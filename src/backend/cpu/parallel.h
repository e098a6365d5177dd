// OpenMP helpers for the CPU kernels.
//
// parallel_for splits [0, n) into contiguous ranges over the OpenMP threads
// (static schedule). Results that are reduced across ranges would then depend
// on the thread count; parallel_for_chunks instead cuts [0, n) into chunks of a
// fixed size (a function of n and `chunk` only) so each chunk's partial result
// is the same on any thread count, and parallel_reduce_deterministic adds the
// partials in chunk order. Nested calls (from inside a parallel region) run
// serially on the calling thread.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace t5x::cpu {

// Threads a top-level parallel_for would use.
inline int num_threads() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

// fn(begin, end) over disjoint ranges covering [0, n); ranges hold at least
// `grain` items (except possibly the last), so tiny loops stay serial.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t max_tasks = (n + grain - 1) / grain;
  int threads = int(std::min<int64_t>(num_threads(), max_tasks));
  if (threads <= 1) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

// Number of fixed-size chunks parallel_for_chunks cuts [0, n) into.
inline int64_t num_chunks(int64_t n, int64_t chunk) {
  return n <= 0 ? 0 : (n + chunk - 1) / std::max<int64_t>(chunk, 1);
}

// fn(chunk_index, begin, end) for chunk_index in [0, num_chunks(n, chunk)),
// begin = chunk_index * chunk. Chunks are spread dynamically over threads;
// the boundaries never depend on the thread count.
template <typename F>
void parallel_for_chunks(int64_t n, int64_t chunk, F&& fn) {
  chunk = std::max<int64_t>(chunk, 1);
  int64_t nc = num_chunks(n, chunk);
  if (nc <= 0) return;
  int threads = int(std::min<int64_t>(num_threads(), nc));
  if (threads <= 1) {
    for (int64_t c = 0; c < nc; ++c) fn(c, c * chunk, std::min(n, (c + 1) * chunk));
    return;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t c = 0; c < nc; ++c) fn(c, c * chunk, std::min(n, (c + 1) * chunk));
}

// sum over chunks of fn(begin, end) -> T, added in chunk order starting from
// `init`: bitwise identical for any thread count.
template <typename T, typename F>
T parallel_reduce_deterministic(int64_t n, int64_t chunk, T init, F&& fn) {
  std::vector<T> partial(size_t(num_chunks(n, chunk)));
  parallel_for_chunks(n, chunk, [&](int64_t c, int64_t b, int64_t e) { partial[size_t(c)] = fn(b, e); });
  for (const T& p : partial) init = init + p;
  return init;
}

}  // namespace t5x::cpu
