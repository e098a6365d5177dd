// A fresh, empty directory for one test: $TMPDIR/t5x_<suite>_<pid>/<name>,
// where <suite> is the running gtest suite, so that test binaries and suites
// running side by side (ctest -j) never share a directory.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace t5x_test {

inline std::string tmpdir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string suite = info ? info->test_suite_name() : "test";
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("t5x_" + suite + "_" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace t5x_test
