// Metric aggregation as t5x's CLU metrics do it, their summaries
// (TensorBoard event files + JSONL) and the terminal progress line.
//
// Aggregation (t5x/metrics.py): a metric whose count is 1 in the model's
// output (loss, z_loss, cross_ent_loss, num_examples, ... : AveragePerStep /
// Sum) is summed over microbatches and processes of a step and averaged over
// the steps of a summary window; the others (accuracy,
// loss_per_nonpadding_target_token, ...: Average) are total / count over
// everything merged.
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "t5x/models/losses.h"
#include "t5x/summaries/event_writer.h"
#include "t5x/summaries/metrics_writer.h"
#include "t5x/trainer/distributed.h"

namespace t5x::trainer {

struct AggMetric {
  double total = 0, count = 0;
  bool per_step = false;
};

class MetricAccumulator {
 public:
  // Merges one microbatch / batch output into the current step.
  void add(const Metrics& m);
  // Closes the current step. Its metrics are the global batch's (summed over
  // 'data' by the step, or computed on global arrays).
  void end_step();
  // Adds named values averaged per step (learning rate, timing).
  void add_step_value(const std::string& name, double v);
  int64_t steps() const { return steps_; }
  // Values of the window (per-step metrics / steps; others total / count).
  std::map<std::string, double> values() const;
  // Value of one metric of the last closed step.
  double last(const std::string& name) const;
  void reset();
  bool is_per_step(const std::string& name) const {
    auto it = window_.find(name);
    return it != window_.end() && it->second.per_step;
  }

 private:
  std::map<std::string, AggMetric> step_, window_, last_;
  int64_t steps_ = 0;
};

// TensorBoard + JSONL writer of one summary directory; only the chief
// process writes (others get a disabled logger).
class SummaryLogger {
 public:
  SummaryLogger() = default;
  SummaryLogger(const std::string& dir, bool enabled);
  void write(int64_t step, const std::map<std::string, double>& values, const std::string& prefix = "");
  void text(int64_t step, const std::string& tag, const std::string& text);
  bool enabled() const { return events_ != nullptr; }

 private:
  std::unique_ptr<EventFileWriter> events_;
  std::unique_ptr<MetricsJsonlWriter> jsonl_;
};

// "step 120/1000  loss 3412.5  loss_per_nonpadding_target_token 2.1328
// 1200 tok/s  lr 0.01  elapsed 0:40  ETA 0:12:03". `loss` is the step's loss
// as t5x logs it: the token sum by default (LOSS_NORMALIZING_FACTOR = None,
// t5x#1093), so it grows with the batch; the per-token value next to it is
// t5x's loss_per_nonpadding_target_token (loss / non-padding target tokens,
// both global). On a terminal the line is redrawn in place; otherwise one
// plain line per `every` steps.
class ProgressLine {
 public:
  ProgressLine(std::ostream* out, int64_t start_step, int64_t total_steps, bool tty, int64_t every = 10);
  void update(int64_t step, double loss, double loss_per_token, double tokens_per_sec, double lr);
  void message(const std::string& line);  // a full line (clears the progress line first)
  void finish();

 private:
  std::ostream* out_;
  int64_t start_, total_, every_;
  bool tty_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point t0_;
};

std::string format_duration(double seconds);  // "1:02:03" / "2:03"

}  // namespace t5x::trainer
