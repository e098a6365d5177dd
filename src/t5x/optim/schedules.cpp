#include "t5x/optim/schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace t5x {

namespace {

enum class Factor { kConstant, kLinearWarmup, kLinearDecay, kRsqrtDecay, kRsqrtNormalizedDecay, kDecayEvery, kCosineDecay };

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

Factor parse_factor(const std::string& name) {
  static const std::vector<std::pair<std::string, Factor>> kNames = {
      {"constant", Factor::kConstant},       {"linear_warmup", Factor::kLinearWarmup},
      {"linear_decay", Factor::kLinearDecay}, {"rsqrt_decay", Factor::kRsqrtDecay},
      {"rsqrt_normalized_decay", Factor::kRsqrtNormalizedDecay},
      {"decay_every", Factor::kDecayEvery},  {"cosine_decay", Factor::kCosineDecay}};
  for (const auto& [n, f] : kNames)
    if (n == name) return f;
  std::string known;
  for (const auto& [n, f] : kNames) known += (known.empty() ? "" : ", ") + n;
  throw_invalid("create_learning_rate_scheduler", "Unknown factor '" + name + "' (known: " + known + ")");
}

}  // namespace

LearningRateSchedule create_learning_rate_scheduler(const LearningRateSchedulerConfig& config) {
  std::vector<Factor> factors;
  std::stringstream ss(config.factors);
  for (std::string part; std::getline(ss, part, '*');) factors.push_back(parse_factor(trim(part)));
  const LearningRateSchedulerConfig c = config;
  for (Factor f : factors) {
    bool needs_warmup = f == Factor::kLinearWarmup || f == Factor::kLinearDecay;
    if (needs_warmup && c.warmup_steps <= 0)
      throw_invalid("create_learning_rate_scheduler", "linear_warmup / linear_decay need warmup_steps > 0");
    if (f == Factor::kDecayEvery && c.steps_per_decay <= 0)
      throw_invalid("create_learning_rate_scheduler", "decay_every needs steps_per_decay > 0");
    if (f == Factor::kCosineDecay && c.steps_per_cycle <= 0)
      throw_invalid("create_learning_rate_scheduler", "cosine_decay needs steps_per_cycle > 0");
  }
  return [c, factors](int64_t step) {
    const int64_t s = std::max<int64_t>(0, step - c.step_offset);
    const double sd = double(s), w = double(c.warmup_steps);
    double ret = 1.0;
    for (Factor f : factors) {
      switch (f) {
        case Factor::kConstant: ret *= c.base_learning_rate; break;
        case Factor::kLinearWarmup: ret *= std::min(1.0, sd / w); break;
        case Factor::kLinearDecay:
          ret *= c.base_learning_rate * std::min(sd / w, 1.0 + c.decay_factor * (w - sd));
          break;
        case Factor::kRsqrtDecay: ret /= std::sqrt(std::max(sd, w)); break;
        case Factor::kRsqrtNormalizedDecay:
          ret *= std::sqrt(w);
          ret /= std::sqrt(std::max(sd, w));
          break;
        case Factor::kDecayEvery: ret *= std::pow(c.decay_factor, double(s / c.steps_per_decay)); break;
        case Factor::kCosineDecay: {
          const double progress = std::max(0.0, (sd - w) / double(c.steps_per_cycle));
          const double frac = progress - std::floor(progress);  // Python % 1.0
          ret *= std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * frac)));
          break;
        }
      }
    }
    return std::max(ret, c.min_learning_rate);
  };
}

LearningRateSchedule linear_schedule(double init_value, double end_value, int64_t transition_steps,
                                     int64_t transition_begin) {
  if (transition_steps <= 0) return [init_value](int64_t) { return init_value; };
  transition_begin = std::max<int64_t>(0, transition_begin);
  return [=](int64_t step) {
    const int64_t t = std::clamp<int64_t>(step - transition_begin, 0, transition_steps);
    const double frac = 1.0 - double(t) / double(transition_steps);
    return (init_value - end_value) * frac + end_value;
  };
}

LearningRateSchedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha, double exponent) {
  if (decay_steps <= 0)
    throw_invalid("cosine_decay_schedule", "requires positive decay_steps, got " + std::to_string(decay_steps));
  return [=](int64_t step) {
    const double t = double(std::min<int64_t>(step, decay_steps));
    const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * t / double(decay_steps)));
    return init_value * ((1.0 - alpha) * std::pow(cosine, exponent) + alpha);
  };
}

LearningRateSchedule warmup_cosine_decay_schedule(double init_value, double peak_value, int64_t warmup_steps,
                                                  int64_t decay_steps, double end_value, double exponent) {
  const double alpha = peak_value == 0.0 ? 0.0 : end_value / peak_value;
  auto warm = linear_schedule(init_value, peak_value, warmup_steps);
  auto decay = cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent);
  return [=](int64_t step) { return step < warmup_steps ? warm(step) : decay(step - warmup_steps); };
}

}  // namespace t5x
