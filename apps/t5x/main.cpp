// The `t5x` command line: t5x's train.py / eval.py / infer.py as one binary.
//
//   t5x train|eval|infer|score [--gin_file=F ...] [--gin_search_paths=A,B]
//       [--gin.NAME=VALUE ...] [--gin_bindings=TEXT ...] [--module=LIB.so|TASKS.gin]
//       [--seqio_additional_cache_dirs=DIR,DIR]
//   (--gin.MIXTURE_OR_TASK_MODULE="'LIB.so'" or "'TASKS.gin'" loads it as --module does)
//   t5x --run_mode=train ...       (same as the subcommand)
//   t5x ckpt info|export-hf|import-hf|import-tf|convert-gqa ...   (checkpoint tools, ckpt_cmd.h)
//   t5x cpu                        (what the kernels run on: ISA, oneDNN, bf16 path)
//   t5x config [gin flags]         (the operative config a run would write, on stdout)
//   t5x partition [gin flags] [--mesh=data=D,model=M | --processes=N] [--rank=R]
//       [--extrapolate_layers]     (per-process bytes and communication of a
//                                   training step, partition_report.h)
//
// Exit status: 0 done, 1 error (message on stderr), 2 stopped on a
// non-finite loss, 64 usage.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <iostream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ckpt_cmd.h"
#include "ops/profile.h"
#include "backend/cpu/cpu_info.h"
#include "backend/cpu/malloc_tuning.h"
#include "seqio/cache.h"
#include "seqio/registration.h"
#include "t5x/checkpoints/fault_inject.h"
#include "t5x/gin/flags.h"
#include "t5x/task_file/task_file.h"
#include "t5x/trainer/infer.h"
#include "t5x/trainer/partition_report.h"
#include "t5x/trainer/trainer.h"
#ifdef T5X_HAVE_BIBLE_TASKS
#include "bible/tasks.h"
#endif

namespace {

constexpr const char* kUsage =
    "usage: t5x train|eval|infer|score --gin_file=FILE [--gin_file=FILE ...]\n"
    "           [--gin_search_paths=DIR,DIR] [--gin.NAME=VALUE ...] [--gin_bindings=TEXT ...]\n"
    "           [--module=TASKS.so|TASKS.gin] [--seqio_additional_cache_dirs=DIR,DIR]\n"
    "Tasks and Mixtures declared in gin (seqio.Task / seqio.Mixture bindings, docs/seqio.md) are read\n"
    "from the --gin_file files and from --gin.MIXTURE_OR_TASK_MODULE=\"'tasks.gin'\"; a plugin (.so)\n"
    "registering tasks in C++ is loaded by --module or MIXTURE_OR_TASK_MODULE alike\n"
    "  train  train.py: configs/runs/{pretrain,finetune}.gin (MODEL_DIR, MIXTURE_OR_TASK_NAME,\n"
    "         TASK_FEATURE_LENGTHS, TRAIN_STEPS); resumes from MODEL_DIR automatically\n"
    "  eval   eval.py: configs/runs/eval.gin (CHECKPOINT_PATH, EVAL_OUTPUT_DIR)\n"
    "  infer  infer.py: configs/runs/infer.gin (CHECKPOINT_PATH, INFER_OUTPUT_DIR)\n"
    "  score  infer.py with mode='score': log-likelihood of the targets\n"
    "  ckpt   checkpoint tools: info, export-hf, import-hf, import-tf, convert-gqa, upcycle (t5x ckpt --help)\n"
    "  cpu    what the kernels run on (ISA, oneDNN, the bf16 product path; T5X_CPU_ISA caps the ISA)\n"
    "  config the operative config of the gin files and bindings, as a run writes it to config.gin\n"
    "  partition  the train config's bytes per process (parameters, optimizer state, step peak) and\n"
    "         communication per collective of one one-mesh training step, for one process of\n"
    "         --mesh=data=D,model=M (or --processes=N with the gin partitioner), simulated in this\n"
    "         process: [--rank=R] [--extrapolate_layers] (docs/sharding.md, \"Partition report\")\n"
    "USE_CACHED_TASKS=True reads the caches `seqio cache TASK --output DIR` wrote: pass DIR with\n"
    "--seqio_additional_cache_dirs=DIR (t5x's flag) or seqio.add_global_cache_dirs.global_cache_dirs = ['DIR']\n"
    "Run several processes with: mpirun -np N t5x train|eval|infer|score ... (one (data, model) mesh: batch\n"
    "split over 'data'; parameters split over 'model' by logical_axis_rules when\n"
    "partitioning.PjitPartitioner.num_partitions > 1; infer/score/eval write on process 0)\n";

// `t5x MODE --help`: what MODE reads and writes (docs/trainer.md), after the
// flags every mode takes.
std::string mode_usage(const std::string& mode) {
  const std::string flags =
      " --gin_file=FILE [--gin_file=FILE ...] [--gin_search_paths=DIR,DIR]\n"
      "           [--gin.NAME=VALUE ...] [--gin_bindings=TEXT ...] [--module=TASKS.so|TASKS.gin]\n"
      "           [--seqio_additional_cache_dirs=DIR,DIR]\n";
  if (mode == "train")
    return "usage: t5x train" + flags +
           "t5x's train.py. The gin files give MODEL (configs/models/...) and a run config\n"
           "(configs/runs/pretrain.gin or finetune.gin, or a file including one) whose macros must be set:\n"
           "MODEL_DIR, MIXTURE_OR_TASK_NAME, TASK_FEATURE_LENGTHS, TRAIN_STEPS (the total, not per run);\n"
           "finetune.gin also INITIAL_CHECKPOINT_PATH. Writes MODEL_DIR/checkpoint_<step>, config.gin,\n"
           "train/ (TensorBoard events, metrics.jsonl) and the evaluations' summaries; a rerun with the\n"
           "same MODEL_DIR resumes from its latest checkpoint. Exit 2: the loss became non-finite.\n"
           "  t5x train --gin_file=configs/examples/bible/span_corruption_pretrain.gin --gin.MODEL_DIR=runs/pretrain\n"
           "Under mpirun -np N: one (data, model) mesh over the processes (docs/sharding.md).\n";
  if (mode == "eval")
    return "usage: t5x eval" + flags +
           "t5x's eval.py: the seqio metrics of a checkpoint. The gin files give MODEL and\n"
           "configs/runs/eval.gin, whose macros must be set: MIXTURE_OR_TASK_NAME, CHECKPOINT_PATH\n"
           "(a checkpoint_<step> directory), EVAL_OUTPUT_DIR. Writes EVAL_OUTPUT_DIR/inference_eval/:\n"
           "<task>-metrics.jsonl, the predictions <task>-<step>.jsonl and TensorBoard events.\n"
           "  t5x eval --gin_file=configs/models/t5_1_1/mini.gin --gin_file=configs/runs/eval.gin \\\n"
           "    --gin_file=configs/examples/bible/common.gin --gin.MIXTURE_OR_TASK_NAME=bible_translate_en_es \\\n"
           "    --gin.CHECKPOINT_PATH=runs/finetune/checkpoint_2500 --gin.EVAL_OUTPUT_DIR=runs/finetune/eval\n";
  if (mode == "infer" || mode == "score")
    return "usage: t5x " + mode + flags +
           (mode == "infer" ? "t5x's infer.py: decodes the task's inputs (decode_fn: greedy, beam search or sampling).\n"
                            : "t5x's infer.py with mode='score': the log-likelihood of each example's targets.\n") +
           "The gin files give MODEL and configs/runs/infer.gin, whose macros must be set:\n"
           "MIXTURE_OR_TASK_NAME, TASK_FEATURE_LENGTHS, CHECKPOINT_PATH, INFER_OUTPUT_DIR. Writes\n"
           "INFER_OUTPUT_DIR/<task>-" +
           (mode == "infer" ? "predict" : "score") +
           ".jsonl-00000-of-00001 (one JSON object per example), in chunks a rerun\n"
           "with the same settings reuses.\n";
  if (mode == "config")
    return "usage: t5x config" + flags +
           "Prints the operative config of the gin files and bindings: what train, eval and infer write\n"
           "to config.gin (macros, then one section per configurable), without running anything. Macros\n"
           "that are still missing are listed on stderr. The text reads back into t5x.cpp and into Python\n"
           "gin-config (docs/gin.md, \"Operative config\").\n";
  if (mode == "partition")
    return "usage: t5x partition --gin_file=FILE ... [--mesh=data=D,model=M | --processes=N] [--rank=R]\n"
           "           [--extrapolate_layers]\n"
           "The train config's bytes per process (parameters, optimizer state, step peak) and the\n"
           "communication per collective of one training step, for process R of the mesh, simulated in\n"
           "this process (no MPI); --processes=N takes the gin partitioner's mesh (docs/sharding.md,\n"
           "\"Partition report\").\n";
  return kUsage;
}

// Why the Bible tasks are not registered (no prepared data), or empty. Said
// only when a task or mixture name is not found: other runs do not need them.
std::string& bible_note() {
  static std::string why;
  return why;
}

void register_tasks() {
  seqio::register_builtin_tasks();
#ifdef T5X_HAVE_BIBLE_TASKS
  std::string why;
  if (!t5x::bible::register_bible_tasks(&why)) bible_note() = why;
#endif
  seqio::load_task_modules();
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (size_t b = 0, e; b <= s.size(); b = e + 1) {
    e = std::min(s.find(',', b), s.size());
    if (e > b) out.push_back(s.substr(b, e - b));
  }
  return out;
}

// use_cached over tasks without a cache step, a remote vocabulary path: said
// once, by the chief.
void warn_datasets(std::ostream* log, const t5x::trainer::ModelConfig& model,
                   std::initializer_list<const t5x::trainer::DatasetConfig*> cfgs) {
  if (!log) return;
  std::set<std::string> said;
  for (const auto* c : cfgs) {
    if (!c) continue;
    auto warnings = t5x::trainer::use_cached_warnings(*c);
    if (auto w = t5x::trainer::check_model_vocabulary(model, *c)) warnings.push_back(*w);
    for (const auto& w : warnings)
      if (said.insert(w).second) std::cerr << "t5x: " << w << "\n";
  }
}

// Every process of an mpirun must run one config: a process with another
// TRAIN_STEPS waited forever in a collective, another BATCH_SIZE trained on
// a wrong batch, another mlp_dim died in MPI_ERR_TRUNCATE. Each process
// compares its operative config's FNV-1a hash with process 0's; all learn
// whether any differs, so that all stop.
void check_same_config(t5x::Communicator& world, const std::string& text) {
  int64_t h = int64_t(0xcbf29ce484222325ull);
  for (unsigned char ch : text) h = int64_t((uint64_t(h) ^ ch) * 0x100000001b3ull);
  int64_t h0 = h;
  world.broadcast(&h0, 1, t5x::CommDtype::kI64, 0);
  const int64_t differs = h != h0;
  int64_t count = 0;
  world.all_reduce(&differs, &count, 1, t5x::CommDtype::kI64);
  if (count == 0) return;
  throw std::invalid_argument(
      "the processes run different gin configs: " + std::to_string(count) + " of " + std::to_string(world.size()) +
      " differ from process 0's" + (differs ? " (this one among them)" : "") +
      "\n  hint: give every process the same --gin_file and --gin flags (an MPMD launch `mpiexec -n 1 A : -n 1 B` "
      "runs different ones)");
}

// --name=N as an integer; "t5x: --name=x: not an integer" otherwise.
int64_t int_flag(const std::string& arg) {
  const std::string v = arg.substr(arg.find('=') + 1);
  size_t used = 0;
  try {
    const int64_t n = std::stoll(v, &used);
    if (used == v.size()) return n;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(arg + ": not an integer");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace t5x;
  // Reuse freed activation buffers across steps instead of re-faulting them
  // (docs/performance.md).
  cpu::retain_freed_memory();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "cpu") {  // the startup line alone
    if (args.size() > 1) {
      std::cout << "usage: t5x cpu\n  prints the CPU line every command logs at start-up: the SIMD target chosen "
                   "(capped by T5X_CPU_ISA) and oneDNN's\n";
      return args[1] == "-h" || args[1] == "--help" ? 0 : 64;
    }
    try {
      std::cout << cpu::describe_cpu() << "\n";
    } catch (const std::exception& e) {
      std::cerr << "t5x cpu: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  if (!args.empty() && args[0] == "ckpt")  // checkpoint tools: no gin, no MPI
    return cli::run_ckpt_command({args.begin() + 1, args.end()}, std::cout, std::cerr);
  std::string mode;
  std::vector<std::string> rest;
  std::shared_ptr<Communicator> world;
  try {
    gin::GinFlags flags = gin::parse_gin_flags(args, &rest);
    std::vector<std::string> modules;
    trainer::PartitionOptions part;
    bool help = false;
    for (const auto& a : rest) {
      if (a == "-h" || a == "--help") help = true;
      else if (a.rfind("--run_mode=", 0) == 0) mode = a.substr(11);
      else if (a.rfind("--module=", 0) == 0) modules.push_back(a.substr(9));
      else if (a.rfind("--mesh=", 0) == 0 || a.rfind("--processes=", 0) == 0 || a.rfind("--rank=", 0) == 0) {
        // A malformed flag is a usage error (exit 64), like an unknown one.
        try {
          if (a[2] == 'm') part.mesh = trainer::parse_mesh_flag(a.substr(7));
          else if (a[2] == 'p') part.processes = int_flag(a);
          else part.rank = int(int_flag(a));
        } catch (const std::invalid_argument& e) {
          std::cerr << "t5x: " << e.what() << "\n" << kUsage;
          return 64;
        }
      }
      else if (a == "--extrapolate_layers") part.extrapolate_layers = true;
      else if (a.rfind("--seqio_additional_cache_dirs=", 0) == 0) seqio::add_global_cache_dirs(split_list(a.substr(30)));
      else if (a.rfind("--", 0) != 0 && mode.empty()) mode = a;
      else { std::cerr << "t5x: unknown argument '" << a << "'\n" << kUsage; return 64; }
    }
    if (help) {  // `t5x --help`, or `t5x MODE --help` for MODE's own
      std::cout << mode_usage(mode);
      return 0;
    }
    if (mode != "train" && mode != "eval" && mode != "infer" && mode != "score" && mode != "partition" &&
        mode != "config") {
      std::cerr << (mode.empty() ? "t5x: missing run mode\n" : "t5x: unknown run mode '" + mode + "'\n") << kUsage;
      return 64;
    }
    if (flags.files.empty()) { std::cerr << "t5x: no --gin_file given\n" << kUsage; return 64; }
    // `partition` simulates a rank of the mesh in this one process, and
    // `config` runs nothing: no MPI.
    if (mode != "partition" && mode != "config") world = init_communicator();
    const bool chief = !world || world->rank() == 0;
    register_tasks();
    task_file::register_configurables();
    for (const auto& m : modules) task_file::load_module(m, flags.search_paths);
    gin::Config cfg = gin::load_gin_config(flags);
    task_file::load_declared_tasks(cfg, flags.search_paths);
    if (chief)
      for (const std::string& w : cfg.warnings()) std::cerr << "t5x " << mode << ": warning: " << w << "\n";
    if (world && world->size() > 1) check_same_config(*world, mode + "\n" + cfg.operative_config_str());
    if (mode == "config") {
      cfg.check_macro_cycles();  // missing macros are notes below; a cycle is an error
      std::cout << cfg.operative_config_str() << std::flush;
      for (const gin::MissingMacro& m : cfg.missing_macros())
        std::cerr << "t5x config: note: macro " << m.name << " is not set (needed by " << m.needed_by << " at "
                  << m.used.str() << "); a run needs --gin." << m.name << "=...\n";
      return 0;
    }
    cfg.check_complete();
    if (mode == "partition") {
      std::cout << trainer::partition_report(trainer::read_train_config(cfg, /*check_tasks=*/false), part).to_string();
      return 0;
    }
    check_fault_injection();  // a malformed T5X_FAULT_INJECT fails before anything runs
    cpu::check_thread_count();  // an OMP_NUM_THREADS past `ulimit -u` crashed libgomp
    std::ostream* log = chief ? &std::cout : nullptr;
    // What the kernels run on: speed and the bf16 path differ between CPUs.
    if (log) *log << cpu::describe_cpu() << "\n";
    if (mode == "train") {
      trainer::TrainRunConfig rc = trainer::read_train_config(cfg);
      warn_datasets(log, rc.model, {&rc.train_ds, rc.train_eval_ds ? &*rc.train_eval_ds : nullptr,
                                   rc.infer_eval_ds ? &*rc.infer_eval_ds : nullptr});
      trainer::TrainerOptions opt;
      opt.log = log;
      // Under mpirun each process's stdout is a pseudo-terminal even when
      // mpirun's output goes to a file: plain lines there.
      opt.tty = chief && world->size() == 1 && isatty(STDOUT_FILENO);
      opt.gin = &cfg;
      trainer::Trainer tr(rc, trainer::Distributed::create(rc.partitioner, world), opt);
      auto res = tr.train();
      // T5X_OP_PROFILE: where the whole run's time went, op by op (ops/profile.h).
      if (chief && op_profile_enabled())
        std::cerr << "op profile of the run on process 0 (T5X_OP_PROFILE):\n" << op_profile_report();
      if (res.status == trainer::TrainResult::Status::kNonFinite) {
        if (chief) std::cerr << "t5x: " << res.message << "\n";
        return 2;
      }
      return 0;
    }
    if (mode == "eval") {
      trainer::EvalRunConfig rc = trainer::read_eval_config(cfg);
      warn_datasets(log, rc.model, {&rc.dataset});
      if (chief) cfg.write_operative_config(rc.output_dir);
      trainer::run_eval(rc, trainer::Distributed::create(rc.partitioner, world), log);
      return 0;
    }
    trainer::InferRunConfig rc = trainer::read_infer_config(cfg);
    warn_datasets(log, rc.model, {&rc.dataset});
    if (mode == "score") rc.mode = "score";
    // config.gin once the run is accepted: a refused one (INFER_OUTPUT_DIR
    // holds another run's output) leaves the config that describes it.
    auto st = trainer::run_infer(rc, trainer::Distributed::create(rc.partitioner, world), log,
                                 [&] { cfg.write_operative_config(rc.output_dir); });
    if (chief) std::cout << "wrote " << st.examples << " examples (" << st.chunks_skipped << " chunks reused)\n";
    return 0;
  } catch (const std::bad_alloc&) {
    std::cerr << ((mode.empty() ? "t5x" : "t5x " + mode) +
                  ": out of memory\n  hint: the run needs more memory than this machine gives it; lower "
                  "BATCH_SIZE or TASK_FEATURE_LENGTHS, use bfloat16 activations (ACTIVATION_DTYPE), or split "
                  "the run over more processes\n")
              << std::flush;
    if (world && world->size() > 1) world->abort(1);
    return 1;
  } catch (const std::exception& e) {
    // One write per process, so that the lines of several processes do not interleave.
    const std::string who =
        world && world->size() > 1 ? " [process " + std::to_string(world->rank()) + " of " +
                                         std::to_string(world->size()) + "]"
                                   : "";
    std::string note;
    const std::string what = e.what();
    if (!bible_note().empty() && (what.find("Provider name not registered") != std::string::npos ||
                                  what.find("No Task or Mixture found") != std::string::npos))
      note = "note: Bible tasks not registered: " + bible_note() + "\n";
    std::cerr << ((mode.empty() ? "t5x" : "t5x " + mode) + who + ": " + e.what() + "\n" + note) << std::flush;
    // A failure seen by one process would leave the others waiting.
    if (world && world->size() > 1) world->abort(1);
    return 1;
  }
}
