// Subcommands of the `seqio` tool. Each returns the process exit code and
// writes results to `out`, diagnostics to stderr.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "seqio/dataset.h"

namespace seqio::cli {

// "inputs=512,targets=114" -> map; throws std::invalid_argument.
SequenceLengths parse_lengths(const std::string& s);

int cmd_list(std::ostream& out);

struct ShowArgs {
  std::string name;
  DatasetOptions options;
  int64_t n = -1;
  std::string position_out;  // write the position after the last example here
  std::string resume_from;   // read a position JSON from this file
};
int cmd_show(const ShowArgs& a, std::ostream& out);

struct ConvertArgs {
  std::string converter;
  bool pack = false;
  std::string lengths;
  int32_t bos_id = 0;
  int32_t mask_id = -1;
};
int cmd_convert(const ConvertArgs& a, std::istream& in, std::ostream& out);

int cmd_vocab(const std::string& op, const std::string& spec, std::istream& in, std::ostream& out);

struct CacheArgs {
  std::string task;
  std::string output;
  std::vector<std::string> splits;
  uint64_t seed = 0;
  int threads = 1;
  bool overwrite = false;
};
int cmd_cache(const CacheArgs& a, std::ostream& out);

// `seqio metric NAME --predictions P [--targets T]`. P and T are either one
// example per line, or JSONL: t5x infer's output ("prediction", targets from
// "inputs.targets_pretokenized") or the trainer's inference_eval files
// ("prediction", "target"). Fields may be named with dotted paths.
struct MetricArgs {
  std::string name;
  std::string predictions_file, targets_file;
  std::string prediction_field, target_field;
  std::string strip_prefix;  // removed from each prediction that starts with it
};
int cmd_metric(const MetricArgs& args, std::ostream& out);

}  // namespace seqio::cli
