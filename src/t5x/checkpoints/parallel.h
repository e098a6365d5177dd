// Tiny parallel-for over [0, n) with std::thread; the first exception thrown by
// any task is rethrown in the caller after all threads join.
#pragma once
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace t5x::detail {

inline void parallel_for(int64_t n, int num_threads, const std::function<void(int64_t)>& fn) {
  if (num_threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr err;
  std::mutex mu;
  auto worker = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!err) err = std::current_exception();
        next.store(n);
      }
    }
  };
  std::vector<std::thread> pool;
  int t = int(std::min<int64_t>(num_threads, n));
  for (int k = 0; k < t; ++k) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  if (err) std::rethrow_exception(err);
}

}  // namespace t5x::detail
