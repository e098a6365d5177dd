// Throughput of the T5 pre-training input pipeline: tokenize (SentencePiece)
// + span corruption (noise density 0.15, mean span 3, T5.1.1 lengths
// inputs=512/targets=114) + EncDec packing, on 1 and 2 threads.
//
// Data: the GPL-3 paragraphs of tests/data/seqio repeated to --examples
// documents, held in memory (so the file system is not measured). Prints one
// JSON line per thread count:
//   examples_per_s  source documents per second
//   tokens_per_s    SentencePiece tokens of those documents per second
//   rows_per_s      packed model rows (batch elements) per second
//   target_tokens_per_s  non-padding decoder target tokens per second
//   pack_seconds    part of `seconds` spent in the (single-threaded) converter
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "seqio/feature_converters/feature_converters.h"
#include "seqio/preprocessors/task_steps.h"
#include "seqio/registration.h"
#include "seqio/task.h"

using namespace seqio;

int main(int argc, char** argv) {
  int64_t n_docs = 20000;
  std::vector<int> threads = {1, 2};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--examples") n_docs = std::atoll(argv[i + 1]);
    else if (a == "--threads") threads = {std::atoi(argv[i + 1])};
  }
  const std::string root = data_root();
  std::ifstream f(root + "/tests/data/seqio/gpl3_paragraphs.train.jsonl");
  std::vector<std::string> paras;
  for (std::string line; std::getline(f, line);) {
    auto p = line.find("\"text\": \"");
    if (p != std::string::npos) paras.push_back(line.substr(p + 9, line.rfind('"') - p - 9));
  }
  if (paras.empty()) {
    std::fprintf(stderr, "pipeline_bench: no data under %s (set SEQIO_DATA_ROOT)\n", root.c_str());
    return 1;
  }
  std::vector<Example> docs;
  for (int64_t i = 0; i < n_docs; ++i) docs.push_back(Example{{"text", paras[i % paras.size()]}});
  auto vocab = make_vocabulary("sentencepiece:" + root + "/tests/golden/seqio/vocab/spm1000.model:extra_ids=100");
  int64_t doc_tokens = 0;
  for (int64_t i = 0; i < n_docs; ++i) doc_tokens += static_cast<int64_t>(vocab->encode(paras[i % paras.size()]).size());

  namespace pt = seqio::preprocessors::task;
  auto src = std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"train", docs}});
  Task task("bench_span_corruption", src,
            OutputFeatures{{"inputs", Feature{vocab, true}}, {"targets", Feature{vocab, true}}},
            {pt::rekey({{"inputs", ""}, {"targets", "text"}}), pt::tokenize(/*copy_pretokenized=*/false),
             Preprocessor::CachePlaceholder(), pt::span_corruption(), pt::append_eos_after_trim()});
  const SequenceLengths lengths{{"inputs", 512}, {"targets", 114}};
  EncDecFeatureConverter conv(FeatureConverterOptions{/*pack=*/true});
  const int64_t window = conv.packing_window(lengths) * 16;

  for (int t : threads) {
    DatasetOptions o;
    o.sequence_lengths = lengths;
    o.seed = 1;
    o.shuffle = true;
    o.num_threads = t;
    auto t0 = std::chrono::steady_clock::now();
    auto ds = task.get_dataset(o);
    std::vector<Example> chunk;
    int64_t rows = 0, target_tokens = 0, examples = 0;
    double pack_s = 0;
    auto flush = [&] {
      auto p0 = std::chrono::steady_clock::now();
      for (const auto& r : conv(chunk, lengths)) {
        ++rows;
        for (int32_t id : get_tokens(r, "decoder_target_tokens")) target_tokens += id != 0;
      }
      chunk.clear();
      pack_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    };
    Example ex;
    while (ds->next(ex)) {
      chunk.push_back(std::move(ex));
      ++examples;
      if (static_cast<int64_t>(chunk.size()) >= window) flush();
    }
    flush();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "{\"suite\":\"pipeline\",\"name\":\"tokenize+span_corruption+pack\",\"threads\":%d,\"documents\":%lld,"
        "\"span_corruption_examples\":%lld,\"seconds\":%.3f,\"examples_per_s\":%.1f,\"tokens_per_s\":%.1f,"
        "\"rows_per_s\":%.1f,\"target_tokens_per_s\":%.1f,\"pack_seconds\":%.3f,\"lengths\":{\"inputs\":512,\"targets\":114}}\n",
        t, static_cast<long long>(n_docs), static_cast<long long>(examples), s, n_docs / s, doc_tokens / s,
        rows / s, target_tokens / s, pack_s);
    std::fflush(stdout);
  }
  return 0;
}
