// Gin command-line flags as t5x's binaries take them (t5x/train.py flags
// and t5x/gin_utils.py rewrite_gin_args):
//   --gin_file=PATH              repeatable; files are parsed in order
//   --gin_search_paths=A,B       comma-separated, repeatable; appended in order
//   --gin_bindings=BINDING       repeatable; applied after all files
//   --gin.NAME=VALUE             rewritten to the binding `NAME = VALUE`
// Each flag also accepts its value as the next argument (`--gin_file PATH`),
// except --gin.NAME which needs '='.
//
// VALUE of --gin.NAME is gin text (`--gin.MODEL_DIR="'/tmp/m'"` as in t5x).
// As a convenience a bare word that is not a gin value
// (`--gin.MODEL_DIR=/tmp/m`, `--gin.MIXTURE_OR_TASK_NAME=wmt_ende`) is taken
// as a string; True/False/None/numbers/containers keep their meaning.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "t5x/gin/config.h"

namespace t5x::gin {

struct CommandLineBinding {
  std::string text;    // gin text, e.g. "MODEL_DIR = '/tmp/m'"
  std::string origin;  // names the flag in errors, e.g. "<--gin.MODEL_DIR>"
};

struct GinFlags {
  std::vector<std::string> files;
  std::vector<std::string> search_paths;
  std::vector<CommandLineBinding> bindings;  // command-line order
};

// Takes the gin flags out of `args` (program name excluded); the other
// arguments are appended to `rest` in order when it is non-null. Throws
// GinError (location "<command line>") for `--gin.NAME` without '=' or a
// flag missing its value.
GinFlags parse_gin_flags(const std::vector<std::string>& args,
                         std::vector<std::string>* rest = nullptr);

// "--gin.NAME=VALUE" -> "NAME = VALUE" (VALUE quoted when it is a bare word,
// see above). Throws GinError when there is no '='.
std::string rewrite_gin_arg(std::string_view arg);

// Parses flags.files then flags.bindings into a Config.
Config load_gin_config(const GinFlags& flags, const Registry* registry = &Registry::global(),
                       bool skip_unknown = false);

}  // namespace t5x::gin
