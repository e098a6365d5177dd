// seqio: list, show, convert, vocab, cache and metric (see docs/seqio.md).
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.h"
#include "seqio/registration.h"
#include "t5x/task_file/task_file.h"
#ifdef T5X_HAVE_BIBLE_TASKS
#include "bible/tasks.h"
#endif

int main(int argc, char** argv) {
  using namespace seqio;
  CLI::App app{"seqio: Tasks, Mixtures, vocabularies, feature converters, caches and metrics"};
  app.require_subcommand(1);
  std::vector<std::string> modules;
  app.add_option("--module", modules,
                 "Task file (.gin: seqio.Task / seqio.Mixture bindings) or shared library defining "
                 "SEQIO_TASK_MODULEs (repeatable)");
  std::vector<std::string> gin_files;
  app.add_option("--gin_file", gin_files, "Task file (gin) declaring seqio Tasks and Mixtures (repeatable)");

  auto* list = app.add_subcommand("list", "List registered tasks and mixtures");

  cli::ShowArgs show;
  std::string shard = "0/1", lengths;
  uint64_t seed = 0;
  int64_t epochs = 1;
  bool shuffle = false;
  auto* sh = app.add_subcommand("show", "Write a task's or mixture's examples as JSONL");
  sh->add_option("name", show.name, "Task or mixture")->required();
  sh->add_option("--split", show.options.split, "Split")->capture_default_str();
  sh->add_option("-n", show.n, "Number of examples (default: all)")->check(CLI::Validator(
      [](std::string& v) { return v.rfind('-', 0) == 0 ? "must be >= 0 (leave -n out for all examples)" : ""; },
      "N >= 0"));
  sh->add_option("--seed", seed, "Pipeline seed")->capture_default_str();
  sh->add_flag("--shuffle", shuffle, "Shuffle (per-epoch file order and per-block permutation)");
  sh->add_option("--shard", shard, "Shard INDEX/COUNT")->capture_default_str();
  sh->add_option("--start", show.options.start, "Skip this many examples");
  sh->add_option("--lengths", lengths, "Sequence lengths NAME=N,... (trims)");
  sh->add_option("--epochs", epochs, "Epochs (0: forever)")->capture_default_str()->check(CLI::Validator(
      [](std::string& v) -> std::string {
        return !v.empty() && v[0] == '-' ? "must be >= 0 (0: forever), got " + v : std::string();
      },
      "EPOCHS"));
  sh->add_option("--threads", show.options.num_threads, "Preprocessing threads")->capture_default_str();
  sh->add_option("--block-size", show.options.block_size, "Examples per block")->capture_default_str();
  sh->add_flag("--use-cached", show.options.use_cached, "Read the offline cache");
  sh->add_option("--cache-dir", show.options.cache_dirs, "Cache directory (repeatable)");
  bool continue_on_empty = false;
  sh->add_flag("--continue-on-empty", continue_on_empty, "Mixtures: go on when a task is exhausted");
  sh->add_option("--position-out", show.position_out, "Write the resumable position JSON here");
  sh->add_option("--resume", show.resume_from, "Resume from a position JSON file");

  cli::ConvertArgs conv;
  auto* cv = app.add_subcommand("convert", "JSONL task features on stdin -> JSONL model features");
  cv->add_option("--converter", conv.converter, "enc_dec|lm|prefix_lm|encoder")->required();
  cv->add_flag("--pack", conv.pack, "Pack examples (seqio next-fit)");
  cv->add_option("--lengths", conv.lengths, "Task feature lengths inputs=N,targets=M")->required();
  cv->add_option("--bos", conv.bos_id, "BOS id of decoder inputs")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cv->add_option("--mask-id", conv.mask_id, "Mask id (encoder converter)");

  std::string vocab_op, vocab_spec;
  auto* vc = app.add_subcommand("vocab", "Encode text lines or decode id lines");
  vc->add_option("op", vocab_op, "encode|decode")->required()->check(CLI::IsMember({"encode", "decode"}));
  vc->add_option("--vocab", vocab_spec, "sentencepiece:PATH[:extra_ids=N] | byte[:extra_ids=N] | passthrough:SIZE")
      ->required();

  cli::CacheArgs cache;
  auto* ca = app.add_subcommand("cache", "Write a task's preprocessed examples to an offline cache");
  ca->add_option("task", cache.task, "Task")->required();
  ca->add_option("--output", cache.output, "Cache directory")->required();
  ca->add_option("--split", cache.splits, "Split (repeatable; default all)");
  ca->add_option("--seed", cache.seed, "Seed of the pre-cache preprocessors")->capture_default_str();
  ca->add_option("--threads", cache.threads, "Threads")->capture_default_str();
  ca->add_flag("--overwrite", cache.overwrite, "Replace an existing cache");

  cli::MetricArgs metric;
  auto* me = app.add_subcommand("metric", "Compute a metric over predictions and targets, print JSON");
  me->add_option("name", metric.name, "Metric name (bleu, rouge, accuracy, squad, ...)")->required();
  me->add_option("--predictions", metric.predictions_file,
                 "One prediction per line, or JSONL (t5x infer output, inference_eval files)")
      ->required();
  me->add_option("--targets", metric.targets_file,
                 "One target per line, or JSONL (default: the targets inside JSONL predictions)");
  me->add_option("--prediction_field", metric.prediction_field, "JSONL field of the prediction (default: prediction)");
  me->add_option("--target_field", metric.target_field,
                 "JSONL field of the target (default: target, inputs.targets_pretokenized, targets_pretokenized)");
  me->add_option("--strip_prefix", metric.strip_prefix, "Remove this prefix from predictions that start with it");

  // Usage errors exit 64 (EX_USAGE), as `t5x` does; --help exits 0. A
  // misspelt command would read "A subcommand is required": name it.
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--module" || a == "--gin_file") {
      ++i;
      continue;
    }
    if (a.rfind('-', 0) == 0) continue;
    std::string names;
    bool known = false;
    for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || c->get_name() == a;
      names += (names.empty() ? "" : ", ") + c->get_name();
    }
    if (!known) {
      std::cerr << "seqio: unknown command '" << a << "'\n  hint: one of " << names << " (seqio --help)\n";
      return 64;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 64;
  }
  try {
    register_builtin_tasks();
    load_task_modules();
    for (const auto& m : modules) t5x::task_file::load_module(m);
    for (const auto& f : gin_files) t5x::task_file::load_task_file(f);
    if (*list) {
#ifdef T5X_HAVE_BIBLE_TASKS
      // Said here as `t5x` says it: the main job's tasks need prepared data.
      std::string why;
      if (!t5x::bible::register_bible_tasks(&why)) std::cerr << "note: Bible tasks not registered: " << why << "\n";
#endif
      return cli::cmd_list(std::cout);
    }
    if (*sh) {
      show.options.seed = seed;
      show.options.shuffle = shuffle;
      show.options.shard = parse_shard_info(shard);
      if (!lengths.empty()) show.options.sequence_lengths = cli::parse_lengths(lengths);
      show.options.num_epochs = epochs == 0 ? std::nullopt : std::optional<int64_t>(epochs);
      show.options.stop_on_empty = !continue_on_empty;
      return cli::cmd_show(show, std::cout);
    }
    if (*cv) return cli::cmd_convert(conv, std::cin, std::cout);
    if (*vc) return cli::cmd_vocab(vocab_op, vocab_spec, std::cin, std::cout);
    if (*ca) return cli::cmd_cache(cache, std::cout);
    if (*me) return cli::cmd_metric(metric, std::cout);
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "seqio: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
