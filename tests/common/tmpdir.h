// Test scratch directories under $TMPDIR, removed when the test program
// exits with every test passed (kept after a failure, to look at).
//   tmpdir(name): a fresh, empty $TMPDIR/t5x_<suite>_<pid>/<name>, where
//     <suite> is the running gtest suite, so that binaries and suites running
//     side by side (ctest -j) never share a directory.
//   remove_at_exit(path): the same clean-up for a directory made elsewhere.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <string>

namespace t5x_test {

class ScratchDirs {
 public:
  void add(const std::filesystem::path& p) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.insert(p);
  }
  ~ScratchDirs() {
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ec;
    for (const auto& d : dirs_) std::filesystem::remove_all(d, ec);
  }

 private:
  std::mutex mu_;
  std::set<std::filesystem::path> dirs_;
};

inline void remove_at_exit(const std::filesystem::path& p) {
  static ScratchDirs dirs;  // destroyed at exit, after the tests
  dirs.add(p);
}

inline std::string tmpdir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string suite = info ? info->test_suite_name() : "test";
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("t5x_" + suite + "_" + std::to_string(::getpid()));
  remove_at_exit(root);
  const std::filesystem::path p = root / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace t5x_test
