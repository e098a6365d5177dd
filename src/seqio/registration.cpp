#include "seqio/registration.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace seqio {

namespace {
struct Modules {
  std::mutex mu;
  std::vector<std::pair<std::string, TaskModuleFn>> queued;
  size_t run = 0;
};
Modules& modules() {
  static Modules m;
  return m;
}
}  // namespace

bool register_task_module(const char* name, TaskModuleFn fn) {
  auto& m = modules();
  std::lock_guard<std::mutex> lock(m.mu);
  m.queued.emplace_back(name, fn);
  return true;
}

std::vector<std::string> load_task_modules() {
  std::vector<std::pair<std::string, TaskModuleFn>> todo;
  {
    auto& m = modules();
    std::lock_guard<std::mutex> lock(m.mu);
    todo.assign(m.queued.begin() + static_cast<long>(m.run), m.queued.end());
    m.run = m.queued.size();
  }
  std::vector<std::string> names;
  for (auto& [name, fn] : todo) {
    fn();
    names.push_back(name);
  }
  return names;
}

void load_shared_module(const std::string& path) {
  // dlopen() looks a name without '/' up on the library path only; a file of
  // that name in the working directory is what `--module=libx.so` means.
  const std::string file = path.find('/') == std::string::npos && std::filesystem::exists(path) ? "./" + path : path;
  if (!dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* e = dlerror();
    throw std::runtime_error("cannot load task module '" + path + "': " + (e ? e : "unknown error"));
  }
  load_task_modules();
}

std::string data_root() {
  if (const char* e = std::getenv("SEQIO_DATA_ROOT")) return e;
#ifdef SEQIO_SOURCE_DIR
  return SEQIO_SOURCE_DIR;
#else
  return ".";
#endif
}

}  // namespace seqio
