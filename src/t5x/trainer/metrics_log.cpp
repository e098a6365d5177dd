#include "t5x/trainer/metrics_log.h"

#include <cmath>
#include <cstdio>
#include <ostream>

namespace t5x::trainer {

void MetricAccumulator::add(const Metrics& m) {
  for (const auto& [k, v] : m) {
    auto& a = step_[k];
    a.total += v.total;
    a.count += v.count;
    a.per_step = v.per_step;
  }
}

void MetricAccumulator::end_step() {
  for (const auto& [k, a] : step_) {
    auto& w = window_[k];
    w.total += a.total;
    w.count += a.count;
    w.per_step = a.per_step;
  }
  last_ = step_;
  step_.clear();
  ++steps_;
}

void MetricAccumulator::add_step_value(const std::string& name, double v) {
  auto& w = window_[name];
  w.total += v;
  w.count += 1;
  w.per_step = false;
}

std::map<std::string, double> MetricAccumulator::values() const {
  std::map<std::string, double> out;
  for (const auto& [k, a] : window_) {
    if (a.per_step) out[k] = steps_ > 0 ? a.total / double(steps_) : 0.0;
    else out[k] = a.count != 0 ? a.total / a.count : 0.0;
  }
  return out;
}

double MetricAccumulator::last(const std::string& name) const {
  auto it = last_.find(name);
  if (it == last_.end()) return std::nan("");
  return it->second.per_step ? it->second.total : (it->second.count ? it->second.total / it->second.count : 0.0);
}

void MetricAccumulator::reset() {
  window_.clear();
  steps_ = 0;
}

SummaryLogger::SummaryLogger(const std::string& dir, bool enabled) {
  if (!enabled) return;
  events_ = std::make_unique<EventFileWriter>(dir);
  jsonl_ = std::make_unique<MetricsJsonlWriter>(dir + "/metrics.jsonl");
}

void SummaryLogger::write(int64_t step, const std::map<std::string, double>& values, const std::string& prefix) {
  if (!events_) return;
  std::map<std::string, double> named;
  for (const auto& [k, v] : values) named[prefix + k] = v;
  events_->add_scalars(named, step);
  events_->flush();
  jsonl_->write(step, named);
}

void SummaryLogger::text(int64_t step, const std::string& tag, const std::string& text) {
  if (!events_) return;
  events_->add_text(tag, text, step);
  events_->flush();
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60), (long long)(t % 60));
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

ProgressLine::ProgressLine(std::ostream* out, int64_t start_step, int64_t total_steps, bool tty, int64_t every)
    : out_(out), start_(start_step), total_(total_steps), every_(std::max<int64_t>(1, every)), tty_(tty),
      t0_(std::chrono::steady_clock::now()) {}

void ProgressLine::update(int64_t step, double loss, double loss_per_token, double tokens_per_sec, double lr) {
  if (!out_) return;
  const bool last = step >= total_;
  if (!tty_ && !(step % every_ == 0 || last || step == start_ + 1)) return;
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double done = double(step - start_);
  const double eta = done > 0 ? el / done * double(total_ - step) : NAN;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %lld/%lld  loss %.4f  loss_per_nonpadding_target_token %.4f  %.0f tok/s  lr %.3g  elapsed %s  ETA %s",
                (long long)step, (long long)total_, loss, loss_per_token, tokens_per_sec, lr,
                format_duration(el).c_str(), format_duration(eta).c_str());
  if (tty_) {
    *out_ << "\r\033[K" << buf << std::flush;
    drawn_ = true;
  } else {
    *out_ << buf << "\n" << std::flush;
  }
}

void ProgressLine::message(const std::string& line) {
  if (!out_) return;
  if (tty_ && drawn_) *out_ << "\r\033[K";
  *out_ << line << "\n" << std::flush;
  drawn_ = false;
}

void ProgressLine::finish() {
  if (out_ && tty_ && drawn_) *out_ << "\n" << std::flush;
  drawn_ = false;
}

}  // namespace t5x::trainer
