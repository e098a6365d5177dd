// End-to-end benchmark of a T5.1.1 encoder-decoder on synthetic token
// batches: a training step (value_and_grad of t5x's loss_fn + Adafactor
// update, as the trainer's train_step does) or greedy decoding with the KV
// cache. Prints one JSON object (scripts/bench/train.sh, decode.sh compare it
// with bench/peers/*.py, which print the same fields).
//
//   t5x_model_bench --mode train|decode [--model small|tiny] [--batch 8]
//                   [--inputs 128] [--targets 32] [--steps 5] [--warmup 2]
//                   [--dtype bfloat16|float32] [--threads N] [--num_kv_heads G]
// --num_kv_heads: grouped-query (G < heads) or multi-query (1) attention in
// the decoder (T5Config::num_kv_heads); the model is then named
// t5_1_1_<model>_kv<G>, and its FLOP count still assumes multi-head K/V
// projections (tokens/s is the figure to compare).
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/malloc_tuning.h"
#include "core/allocator.h"
#include "cpu_peak.h"
#include "flops.h"
#include "ops/ops.h"
#include "ops/profile.h"
#include "t5x/models/models.h"
#include "t5x/optim/adafactor.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode = "train", model = "small", dtype = "bfloat16";
  int64_t batch = 8, inputs = 128, targets = 32, steps = 5, warmup = 2;
  int threads = 0;
  int64_t num_kv_heads = 0;
  bool malloc_tuning = true;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --mode train|decode [--model small|tiny] [--batch N] [--inputs N] [--targets N]\n"
               "          [--steps N] [--warmup N] [--dtype bfloat16|float32] [--threads N]\n"
               "          [--num_kv_heads G] [--no-malloc-tuning]\n",
               argv0);
  std::exit(2);
}

double loadavg1() {
  double l = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = 0;
    std::fclose(f);
  }
  return l;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

t5x::Array random_tokens(std::mt19937& rng, int64_t batch, int64_t len, int64_t vocab) {
  std::uniform_int_distribution<int64_t> d(2, vocab - 1);  // no padding (0) or EOS (1)
  std::vector<int64_t> v(size_t(batch * len));
  for (auto& x : v) x = d(rng);
  return t5x::Array::from_ints(t5x::Shape{{"batch", batch}, {"length", len}}, v, t5x::DType::i32);
}

t5x::Batch synthetic_batch(std::mt19937& rng, const Options& o, int64_t vocab) {
  t5x::Batch b;
  b["encoder_input_tokens"] = random_tokens(rng, o.batch, o.inputs, vocab);
  t5x::Array tgt = random_tokens(rng, o.batch, o.targets, vocab);
  b["decoder_target_tokens"] = tgt;
  // decoder inputs = targets shifted right by one, 0 first (seqio's converter).
  auto t = tgt.to_ints();
  std::vector<int64_t> in(t.size(), 0);
  for (int64_t r = 0; r < o.batch; ++r)
    for (int64_t i = 1; i < o.targets; ++i) in[size_t(r * o.targets + i)] = t[size_t(r * o.targets + i - 1)];
  b["decoder_input_tokens"] = t5x::Array::from_ints(tgt.shape(), in, t5x::DType::i32);
  b["decoder_loss_weights"] = t5x::Array::ones(tgt.shape(), t5x::DType::f32);
  return b;
}

struct Stats {
  double median = 0, min = 0;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stats s;
  s.min = v.front();
  size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.2f", i ? "," : "", v[i]);
    s += b;
  }
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (a == "--mode") o.mode = next();
    else if (a == "--model") o.model = next();
    else if (a == "--dtype") o.dtype = next();
    else if (a == "--batch") o.batch = std::stoll(next());
    else if (a == "--inputs") o.inputs = std::stoll(next());
    else if (a == "--targets") o.targets = std::stoll(next());
    else if (a == "--steps") o.steps = std::stoll(next());
    else if (a == "--warmup") o.warmup = std::stoll(next());
    else if (a == "--threads") o.threads = std::stoi(next());
    else if (a == "--num_kv_heads") o.num_kv_heads = std::stoll(next());
    else if (a == "--no-malloc-tuning") o.malloc_tuning = false;
    else usage(argv[0]);
  }
  if ((o.mode != "train" && o.mode != "decode") || o.steps < 1) usage(argv[0]);
  if (o.malloc_tuning) t5x::cpu::retain_freed_memory();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();

  t5x::T5Config cfg = t5x::t5_1_1_config(o.model);
  cfg.dropout_rate = 0.0;
  cfg.dtype = o.dtype == "float32" ? t5x::DType::f32 : t5x::DType::bf16;
  cfg.num_kv_heads = o.num_kv_heads;
  const std::string model_name = o.model + (o.num_kv_heads ? "_kv" + std::to_string(o.num_kv_heads) : "");
  t5x::LossOptions loss;  // z_loss 1e-4, no label smoothing, no normaliser (base.gin)
  t5x::EncoderDecoderModel model(cfg, loss);
  t5x::ParamTree params = model.init(t5x::prng_key(0));

  t5x::bench::T5Dims dims;
  dims.vocab = cfg.vocab_size;
  dims.embed = cfg.emb_dim;
  dims.heads = cfg.num_heads;
  dims.head_dim = cfg.head_dim;
  dims.mlp = cfg.mlp_dim;
  dims.enc_layers = cfg.num_encoder_layers;
  dims.dec_layers = cfg.num_decoder_layers;
  dims.mlp_inputs = int64_t(cfg.mlp_activations.size());
  dims.logits_via_embedding = cfg.logits_via_embedding;
  const double peak = t5x::bench::detect_cpu_peak(threads).gflops();

  std::mt19937 rng(1234);
  std::vector<double> ms, ms_grad, ms_update, cpu_ms;
  double flops = 0, naive = 0, tokens = 0, final_loss = 0;
  if (o.mode == "train") {
    t5x::AdafactorConfig ac;  // adafactor.Adafactor of base.gin: decay 0.8, standard factor rules
    ac.logical_factor_rules = t5x::standard_logical_factor_rules();
    t5x::Adafactor opt(ac);
    t5x::OptimizerState st = opt.init(params);
    for (int64_t s = 0; s < o.warmup + o.steps; ++s) {
      t5x::Batch b = synthetic_batch(rng, o, cfg.vocab_size);
      if (s == o.warmup) t5x::op_profile_reset();
      auto t0 = Clock::now();
      const double c0 = cpu_seconds();
      auto vg = t5x::value_and_grad([&](const t5x::ParamTree& p) { return model.loss_fn(p, b).first; }, params);
      final_loss = vg.value.item();
      auto t1 = Clock::now();
      opt.apply_gradient(params, st, vg.grads, 0.01);
      auto t2 = Clock::now();
      if (s >= o.warmup) {
        ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
        ms_grad.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        ms_update.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        cpu_ms.push_back(1e3 * (cpu_seconds() - c0));
      }
    }
    auto f = t5x::bench::t5_train_flops(dims, o.batch, o.inputs, o.targets);
    flops = f.train;
    naive = f.naive_train;
    tokens = double(o.batch * (o.inputs + o.targets));
  } else {
    t5x::NoGradGuard ng;
    for (int64_t s = 0; s < o.warmup + o.steps; ++s) {
      t5x::Array enc = random_tokens(rng, o.batch, o.inputs, cfg.vocab_size);
      if (s == o.warmup) t5x::op_profile_reset();
      auto t0 = Clock::now();
      const double c0 = cpu_seconds();
      auto step = model.cached_step_fn(params, enc, o.targets);
      std::vector<int64_t> in(size_t(o.batch * o.targets), 0);
      for (int64_t t = 0; t < o.targets; ++t) {
        t5x::Array inputs = t5x::Array::from_ints(t5x::Shape{{"batch", o.batch}, {"length", o.targets}}, in,
                                                  t5x::DType::i32);
        t5x::Array logits = step->logits(inputs, std::vector<int64_t>(size_t(o.batch), t));
        auto next = t5x::argmax(logits, "vocab").to_ints();
        if (t + 1 < o.targets)
          for (int64_t r = 0; r < o.batch; ++r) in[size_t(r * o.targets + t + 1)] = next[size_t(r)];
      }
      double dt = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (s >= o.warmup) {
        ms.push_back(dt);
        cpu_ms.push_back(1e3 * (cpu_seconds() - c0));
      }
    }
    flops = t5x::bench::t5_decode_flops(dims, o.batch, o.inputs, o.targets);
    tokens = double(o.batch * o.targets);  // generated tokens
  }
  if (t5x::op_profile_enabled())
    std::fprintf(stderr, "op profile over %lld timed steps (T5X_OP_PROFILE):\n%s", (long long)o.steps,
                 t5x::op_profile_report().c_str());
  Stats st = stats(ms);
  std::printf(
      "{\"impl\":\"t5x.cpp\",\"mode\":\"%s\",\"model\":\"t5_1_1_%s\",\"dtype\":\"%s\",\"batch\":%lld,\"inputs\":%lld,"
      "\"targets\":%lld,\"threads\":%d,\"steps\":%lld,\"ms_median\":%.2f,\"ms_min\":%.2f,\"ms_all\":%s,"
      "\"tokens_per_s_median\":%.1f,\"tokens_per_s_max\":%.1f,\"gflop_per_step\":%.2f,\"naive_gflop_per_step\":%.2f,"
      "\"gflops_median\":%.1f,\"gflops_max\":%.1f,\"peak_gflops_fp32\":%.1f,\"mfu_median\":%.3f,\"mfu_max\":%.3f,"
      "\"cpu_ms\":%s,\"ms_value_and_grad\":%s,\"ms_optimizer\":%s,\"peak_rss_mib\":%.1f,\"array_peak_mib\":%.1f,"
      "\"loss\":%.4f,\"loadavg_1min\":%.2f,"
      "\"omp_wait_policy\":\"%s\",\"malloc_tuning\":%s}\n",
      o.mode.c_str(), model_name.c_str(), o.dtype.c_str(), (long long)o.batch, (long long)o.inputs,
      (long long)o.targets, threads, (long long)o.steps, st.median, st.min, json_list(ms).c_str(),
      tokens / (st.median / 1e3), tokens / (st.min / 1e3), flops / 1e9, naive / 1e9,
      flops / 1e9 / (st.median / 1e3), flops / 1e9 / (st.min / 1e3), peak,
      flops / 1e9 / (st.median / 1e3) / peak, flops / 1e9 / (st.min / 1e3) / peak, json_list(cpu_ms).c_str(),
      json_list(ms_grad).c_str(), json_list(ms_update).c_str(), peak_rss_mib(),
      double(t5x::peak_bytes()) / (1024.0 * 1024.0), final_loss, loadavg1(),
      std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "default", o.malloc_tuning ? "true" : "false");
  return 0;
}
