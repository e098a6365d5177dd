// seqio Tasks and Mixtures declared in gin (a "task file"), read into the
// seqio registries at start-up: the configuration counterpart of a Python
// module of `seqio.TaskRegistry.add(...)` calls that t5x imports through
// `--gin.MIXTURE_OR_TASK_MODULE`. No C++ and no rebuild: every `t5x` and
// `seqio` command reads them (docs/seqio.md, "Tasks declared in gin").
//
// A task is the scope of `seqio.Task` bindings; its parts are configurables
// referenced from it, bound in the same scope (gin nests a reference's scope
// inside its caller's):
//
//   my_task/seqio.Task:
//     source = @seqio.TsvDataSource()
//     output_features = {'inputs': @seqio.Feature(), 'targets': @seqio.Feature()}
//     preprocessors = [@seqio.preprocessors.rekey, @seqio.preprocessors.tokenize,
//                      @seqio.CacheDatasetPlaceholder(), @seqio.preprocessors.append_eos_after_trim]
//     metric_fns = ['bleu', 'sequence_accuracy']
//   my_task/seqio.TsvDataSource:
//     split_to_filepattern = {'train': 'data/train.tsv', 'validation': 'data/valid.tsv'}
//     field_names = ['en', 'es']
//   my_task/seqio.preprocessors.rekey.key_map = {'inputs': 'en', 'targets': 'es'}
//   seqio.Feature.vocabulary = 'sentencepiece:data/spm.model:extra_ids=100'
//   my_mix/seqio.Mixture.tasks = [('my_task', 2.0), ('other_task', 1.0)]
//
// Names are seqio's and T5's (seqio.preprocessors.*, t5.data.preprocessors.*,
// t5.evaluation.metrics.*); register_configurables() lists them all. Paths
// are relative to the working directory, as in seqio; `${VAR}` and
// `${VAR:-default}` in them are replaced from the environment.
//
// Errors are t5x::gin::GinError at the value's file:line:column, naming the
// task and field ("task 'my_task': preprocessors[2]: ...") with the nearest
// valid names as the hint: unknown preprocessor, source or metric, a split
// without file patterns, a pattern matching no file, a missing vocabulary
// file, a wrong argument type. Registration errors (a duplicate name, a
// mixture of unknown tasks) are GinErrors at the declaration.
#pragma once

#include <string>
#include <vector>

#include "t5x/gin/config.h"
#include "t5x/gin/registry.h"

namespace t5x::task_file {

// Registers seqio.Task, seqio.Mixture, the sources, seqio.Feature, the
// vocabularies, the built-in preprocessors, postprocessors and metrics as gin
// configurables (idempotent), so that a gin config may bind them.
void register_configurables(gin::Registry& registry = gin::Registry::global());

// The configurable names a task's `preprocessors` list accepts, sorted.
std::vector<std::string> preprocessor_names();

// Registers every task (scope of a seqio.Task binding) and then every mixture
// (scope of a seqio.Mixture binding) of `cfg` into seqio's registries, and
// returns their names in that order. A name already registered by the same
// declaration (same file:line) is skipped, so a file may be read twice.
std::vector<std::string> register_declared(const gin::Config& cfg);

// Parses a task file (gin; `include` works) with the global registry and
// registers what it declares (again: a no-op, see register_declared).
std::vector<std::string> load_task_file(const std::string& path,
                                        const std::vector<std::string>& search_paths = {});

// `--module PATH` of the programs: a task file when PATH ends in ".gin" (found
// as gin files are, with `search_paths`), else a shared library of
// SEQIO_TASK_MODULEs (seqio::load_shared_module).
void load_module(const std::string& path, const std::vector<std::string>& search_paths = {});

// t5x: registers the tasks declared in `cfg` itself (`--gin_file=tasks.gin`)
// and loads the modules named by the macro MIXTURE_OR_TASK_MODULE and by every
// utils.DatasetConfig.module (t5x's names; a string or a list of them, each
// as load_module takes it, with --gin_search_paths). Returns the names
// registered by `cfg` itself.
std::vector<std::string> load_declared_tasks(const gin::Config& cfg,
                                             const std::vector<std::string>& search_paths = {});

}  // namespace t5x::task_file
