// Registration hooks for Task/Mixture definitions.
//
// Built-in demo tasks (small committed real text under tests/data/seqio/)
// come from register_builtin_tasks(). Other code (e.g. examples/) defines a
// task module:
//
//   SEQIO_TASK_MODULE(my_tasks) {
//     seqio::TaskRegistry::add(std::make_shared<seqio::Task>(...));
//   }
//
// and either links its object file into the program (static initialisation
// queues the module; use an OBJECT library or WHOLE_ARCHIVE so the linker
// keeps it) or builds it as a shared library that `seqio --module PATH`
// loads with load_shared_module(). load_task_modules() runs every queued
// module once (like seqio's --module_import).
#pragma once
#include <string>
#include <vector>

namespace seqio {

using TaskModuleFn = void (*)();
// Queues a module; returns true so that it can initialise a static.
bool register_task_module(const char* name, TaskModuleFn fn);
// Runs the queued modules not yet run; returns the names run.
std::vector<std::string> load_task_modules();
// dlopen()s a shared library (its SEQIO_TASK_MODULEs queue themselves) then
// runs load_task_modules(). A bare name ("libx.so") is a file in the working
// directory when there is one, else looked up on the library path as dlopen()
// does. Throws std::runtime_error with dlerror().
void load_shared_module(const std::string& path);

// Registers the demo tasks and mixture (idempotent):
//   gpl3_lm          JSONL paragraphs of the GPL-3 -> "targets" (SentencePiece)
//   gpl3_prefix      same paragraphs split in two -> "inputs"/"targets"; cache placeholder
//   gpl3_lines_copy  text lines (2 files) -> "inputs" = "targets" = the line
//   gpl3_mix         mixture {gpl3_prefix: 2, gpl3_lines_copy: 1}
// Data are found under data_root().
void register_builtin_tasks();

// Directory holding tests/data/seqio and tests/golden: $SEQIO_DATA_ROOT if
// set, else the source tree this binary was built from.
std::string data_root();

}  // namespace seqio

#define SEQIO_TASK_MODULE(name)                                                        \
  static void seqio_task_module_##name();                                             \
  [[maybe_unused]] static const bool seqio_task_module_registered_##name =            \
      ::seqio::register_task_module(#name, &seqio_task_module_##name);                \
  static void seqio_task_module_##name()
