// Helpers shared by the gin tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "t5x/gin/error.h"

namespace t5x::gin::testing {

// Runs `fn`, expecting a GinError whose text contains every piece.
template <class F>
void expect_gin_error(F&& fn, std::initializer_list<std::string> pieces) {
  try {
    fn();
    ADD_FAILURE() << "expected a GinError";
  } catch (const GinError& e) {
    const std::string what = e.what();
    for (const std::string& p : pieces)
      EXPECT_NE(what.find(p), std::string::npos) << "missing '" << p << "' in:\n" << what;
  }
}

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("t5x_gin_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // Writes `text` to `rel` (creating directories) and returns its path.
  std::string write(const std::string& rel, const std::string& text) const {
    const auto p = path_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string str() const { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace t5x::gin::testing
