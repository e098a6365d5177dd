// Writes TensorBoard event files in t5x's MODEL_DIR layout for
// scripts/check/read_tb_events.py:  t5x_write_tb_events OUT_MODEL_DIR
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "t5x/summaries/event_writer.h"
#include "t5x/summaries/metrics_writer.h"

using namespace t5x;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_MODEL_DIR\n", argv[0]);
    return 2;
  }
  const std::string model_dir = argv[1];
  nlohmann::json expected;
  {
    EventFileWriter train(summary_dir(model_dir, SummaryKind::kTrain));
    EventFileWriter eval(summary_dir(model_dir, SummaryKind::kTrainingEval, "c4_span_corruption"));
    MetricsJsonlWriter log(model_dir + "/train-metrics.jsonl");
    for (int step = 1; step <= 5; ++step) {
      double loss = 10.0 / step, lr = 0.01 * std::sqrt(double(step));
      train.add_scalars({{"loss", loss}, {"learning_rate", lr}}, step);
      log.write(step, {{"loss", loss}, {"learning_rate", lr}});
      expected["train"]["loss"].push_back({step, float(loss)});
      expected["train"]["learning_rate"].push_back({step, float(lr)});
    }
    eval.add_scalar("accuracy", 0.25f, 5);
    expected["training_eval/c4_span_corruption"]["accuracy"].push_back({5, 0.25f});
    train.add_text("config", "MODEL_DIR = 'x'", 0);
    expected["text"] = {{"train", {{"config", "MODEL_DIR = 'x'"}}}};
  }
  std::FILE* f = std::fopen((model_dir + "/expected.json").c_str(), "w");
  std::string s = expected.dump(1);
  std::fwrite(s.data(), 1, s.size(), f);
  std::fclose(f);
  return 0;
}
