// End-to-end benchmark of a T5.1.1 encoder-decoder on synthetic token
// batches: a training step (value_and_grad of t5x's loss_fn + Adafactor
// update, as the trainer's train_step does) or greedy decoding with the KV
// cache, on the parameters in their decode layout made once before the
// timed decodes (BaseTransformerModel::decode_params, as `t5x infer` makes it
// for all its batches; its time is ms_decode_params). Prints one JSON
// object (scripts/bench/train.sh, decode.sh compare it with
// bench/peers/*.py, which print the same fields; scripts/bench/moe.sh pairs
// a Mixture-of-Experts model with its dense twin).
//
//   t5x_model_bench --mode train|decode [--model small|tiny] [--batch 8]
//                   [--inputs 128] [--targets 32] [--steps 5] [--warmup 2]
//                   [--dtype bfloat16|float32] [--threads N] [--num_kv_heads G]
//                   [--optimizer adafactor|adamw] [--full-logits] [--topk K]
//                   [--gin_file F ... --gin.NAME=V ... --gin_search_paths P]
// --gin_file: the model of a configs/models gin file (read_model_config, as
// `t5x train` builds it; DROPOUT_RATE = 0.0 unless bound), instead of
// --model; --dtype then only applies when given. The model is named after the
// file (configs/models/moe/mini.gin -> moe_mini). Its loss options come from
// the gin (MoE: aux_loss_factor), the optimizer is base.gin's Adafactor with
// the factor rules moe.gin binds for an MoE model. A training step passes a
// dropout key, as Trainer::train_step does, so MoE layers route with the
// train capacity factor. MoE training steps also report the routing FLOPs
// (bench/model/flops.h moe_train_flops) and the groups / capacity per stack.
// --num_kv_heads: grouped-query (G < heads) or multi-query (1) attention in
// the decoder (T5Config::num_kv_heads); the model is then named
// t5_1_1_<model>_kv<G>, and its FLOP count still assumes multi-head K/V
// projections (tokens/s is the figure to compare).
// Decoding takes each next token as temperature_sample's greedy decode does
// (DecodeStepFn::greedy_tokens: the logits kernel read at bf16 width, exact
// sums for the few candidates); --full-logits computes the whole f32 logits
// product and its argmax instead (the same tokens; the path before that).
// --topk K: each decode is temperature_sample's top-k draw at temperature 1
// (t5x's defaults with topk K: DecodeStepFn::top_candidates, the screen's
// candidates), a fixed key per decode; with --full-logits, from the whole
// logits (a step that gives only logits; the same tokens and scores).
// --optimizer adamw: optax.adamw(weight_decay=0.01) after
// optax.clip_by_global_norm(1.0), the t5x recipe for AdamW, instead of
// base.gin's Adafactor (training only).
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/malloc_tuning.h"
#include "core/allocator.h"
#include "cpu_peak.h"
#include "flops.h"
#include "ops/ops.h"
#include "ops/profile.h"
#include "t5x/gin/flags.h"
#include "t5x/models/gin_model.h"
#include "t5x/models/models.h"
#include "t5x/optim/adafactor.h"
#include "t5x/optim/adamw.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode = "train", model = "small", dtype = "bfloat16";
  bool dtype_given = false;
  t5x::gin::GinFlags gin;
  int64_t batch = 8, inputs = 128, targets = 32, steps = 5, warmup = 2;
  int threads = 0;
  int64_t num_kv_heads = 0;
  bool malloc_tuning = true;
  std::string optimizer = "adafactor";
  bool full_logits = false;
  int64_t topk = 0;
};

// A step that gives only logits: DecodeStepFn's default greedy_tokens and
// top_candidates, from the whole logits.
class LogitsOnly : public t5x::DecodeStepFn {
 public:
  explicit LogitsOnly(t5x::DecodeStepFn& s) : s_(s) {}
  t5x::Array logits(const t5x::Array& d, const std::vector<int64_t>& i) override { return s_.logits(d, i); }
  void gather_rows(const std::vector<int64_t>& rows) override { s_.gather_rows(rows); }

 private:
  t5x::DecodeStepFn& s_;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --mode train|decode [--model small|tiny] [--batch N] [--inputs N] [--targets N]\n"
               "          [--steps N] [--warmup N] [--dtype bfloat16|float32] [--threads N]\n"
               "          [--num_kv_heads G] [--no-malloc-tuning] [--optimizer adafactor|adamw] [--full-logits]\n"
               "          [--topk K]\n"
               "          [--gin_file F ... [--gin.NAME=V ...] [--gin_search_paths P]] (instead of --model)\n",
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

// The JSON's model name for gin files: each path below configs/models/
// without ".gin", '/' -> '_' (configs/models/moe/mini.gin -> moe_mini), else
// the file's stem; several files are joined by '+'.
std::string gin_model_name(const std::vector<std::string>& files) {
  std::string out;
  for (const std::string& f : files) {
    const std::string key = "configs/models/";
    std::string p = f;
    if (auto at = p.rfind(key); at != std::string::npos) p = p.substr(at + key.size());
    else p = std::filesystem::path(p).filename().string();
    if (p.size() > 4 && p.ends_with(".gin")) p.resize(p.size() - 4);
    std::replace(p.begin(), p.end(), '/', '_');
    out += (out.empty() ? "" : "+") + p;
  }
  return out;
}

// Tokens an MoE layer routes for [batch, length]: moe_block pads batch or
// length (whichever needs fewer) to a multiple of experts x replicas.
int64_t moe_padded_tokens(int64_t batch, int64_t length, int64_t er) {
  const int64_t n = batch * length;
  if (n % er == 0) return n;
  int64_t pb = 1, pl = 1;
  while ((n + pb * length) % er != 0) ++pb;
  while ((n + pl * batch) % er != 0) ++pl;
  return n + std::min(pb * length, pl * batch);
}

// Groups, group size and capacity of each stack's MoE layers in a training
// step (nn::num_groups / nn::expert_capacity, train capacity factor).
t5x::bench::MoeDims moe_dims(const t5x::T5Config& cfg, int64_t batch, int64_t in_len, int64_t tgt_len) {
  t5x::bench::MoeDims m;
  m.experts = cfg.moe.num_experts;
  m.selected = cfg.moe.num_selected_experts;
  auto stack = [&](bool encoder, int64_t sparse, int64_t length) {
    t5x::bench::MoeStack s;
    if (sparse == 0) return s;
    const t5x::nn::MoeConfig mc = cfg.moe_config(encoder);
    m.expert_mlp = mc.expert_mlp_dim;
    const int64_t er = mc.num_experts * std::max<int64_t>(1, mc.num_expert_replicas);
    const int64_t n = moe_padded_tokens(batch, length, er);
    s.sparse_layers = sparse;
    s.groups = t5x::nn::num_groups(n, mc.max_group_size, mc.num_experts, er / mc.num_experts, mc.strict_group_size);
    s.group_size = n / s.groups;
    s.capacity = t5x::nn::expert_capacity(s.group_size, mc.num_experts, mc.train_capacity_factor,
                                          mc.min_expert_capacity);
    return s;
  };
  m.enc = stack(true, cfg.num_encoder_sparse_layers, in_len);
  m.dec = stack(false, cfg.num_decoder_sparse_layers, tgt_len);
  return m;
}

std::string moe_json(const t5x::bench::MoeDims& m, const t5x::bench::MoeStepFlops& f, double dense) {
  auto stack = [](const t5x::bench::MoeStack& s) {
    char b[160];
    std::snprintf(b, sizeof b, "{\"sparse_layers\":%lld,\"groups\":%lld,\"group_size\":%lld,\"capacity\":%lld}",
                  (long long)s.sparse_layers, (long long)s.groups, (long long)s.group_size, (long long)s.capacity);
    return std::string(b);
  };
  char b[512];
  std::snprintf(b, sizeof b,
                ",\"moe\":{\"experts\":%lld,\"selected\":%lld,\"expert_mlp\":%lld,\"encoder\":%s,\"decoder\":%s},"
                "\"dense_gflop_per_step\":%.9g,\"moe_router_gflop\":%.9g,\"moe_dispatch_combine_gflop\":%.9g,"
                "\"moe_experts_gflop\":%.9g,\"moe_executed_gflop_per_step\":%.9g",
                (long long)m.experts, (long long)m.selected, (long long)m.expert_mlp, stack(m.enc).c_str(),
                stack(m.dec).c_str(), dense / 1e9, f.router / 1e9, f.dispatch_combine / 1e9, f.experts / 1e9,
                f.executed / 1e9);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc), rest;
  try {
    o.gin = t5x::gin::parse_gin_flags(args, &rest);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "t5x_model_bench: %s\n", e.what());
    return 2;
  }
  if (o.gin.files.empty() && !o.gin.bindings.empty()) {
    std::fprintf(stderr, "t5x_model_bench: --gin.NAME / --gin_bindings need a --gin_file (the model's gin)\n");
    return 2;
  }
  const int nargs = int(rest.size());
  for (int i = 0; i < nargs; ++i) {
    std::string a = rest[size_t(i)];
    auto next = [&]() -> std::string {
      if (i + 1 >= nargs) usage(argv[0]);
      return rest[size_t(++i)];
    };
    if (a == "--mode") o.mode = next();
    else if (a == "--model") o.model = next();
    else if (a == "--dtype") {
      o.dtype = next();
      o.dtype_given = true;
    }
    else if (a == "--batch") o.batch = std::stoll(next());
    else if (a == "--inputs") o.inputs = std::stoll(next());
    else if (a == "--targets") o.targets = std::stoll(next());
    else if (a == "--steps") o.steps = std::stoll(next());
    else if (a == "--warmup") o.warmup = std::stoll(next());
    else if (a == "--threads") o.threads = std::stoi(next());
    else if (a == "--num_kv_heads") o.num_kv_heads = std::stoll(next());
    else if (a == "--no-malloc-tuning") o.malloc_tuning = false;
    else if (a == "--optimizer") o.optimizer = next();
    else if (a == "--full-logits") o.full_logits = true;
    else if (a == "--topk") o.topk = std::stoll(next());
    else usage(argv[0]);
  }
  if ((o.mode != "train" && o.mode != "decode") || o.steps < 1) usage(argv[0]);
  if (o.optimizer != "adafactor" && o.optimizer != "adamw") usage(argv[0]);
  if (o.malloc_tuning) t5x::cpu::retain_freed_memory();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();

  t5x::T5Config cfg;
  t5x::LossOptions loss;  // z_loss 1e-4, no label smoothing, no normaliser (base.gin)
  std::string model_name;
  if (o.gin.files.empty()) {
    cfg = t5x::t5_1_1_config(o.model);
    cfg.dropout_rate = 0.0;
    model_name = "t5_1_1_" + o.model;
  } else {
    o.gin.bindings.insert(o.gin.bindings.begin(), {"DROPOUT_RATE = 0.0", "<t5x_model_bench default>"});
    t5x::ModelConfig mc;
    try {
      mc = t5x::read_model_config(t5x::gin::load_gin_config(o.gin));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "t5x_model_bench: %s\n", e.what());
      return 2;
    }
    if (mc.decoder_only) {
      std::fprintf(stderr, "t5x_model_bench: %s is a decoder-only model; this benchmark runs encoder-decoder models\n",
                   o.gin.files.front().c_str());
      return 2;
    }
    cfg = mc.network;
    loss = mc.loss;
    model_name = gin_model_name(o.gin.files);
  }
  if (o.gin.files.empty() || o.dtype_given) cfg.dtype = o.dtype == "float32" ? t5x::DType::f32 : t5x::DType::bf16;
  if (o.num_kv_heads) {
    cfg.num_kv_heads = o.num_kv_heads;
    model_name += "_kv" + std::to_string(o.num_kv_heads);
  }
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
  std::string extra_json;  // MoE: routing FLOPs and groups (training)
  if (o.mode == "train") {
    t5x::AdafactorConfig ac;  // adafactor.Adafactor of base.gin: decay 0.8, standard factor rules
    // moe.gin binds t5x contrib/moe's rules (expert kernels factored per expert).
    ac.logical_factor_rules = cfg.is_moe() ? t5x::moe_logical_factor_rules() : t5x::standard_logical_factor_rules();
    t5x::AdamWConfig wc;
    wc.weight_decay = 0.01;
    wc.chain = {t5x::ChainedClip::global_norm(1.0)};
    std::unique_ptr<t5x::Optimizer> opt;
    if (o.optimizer == "adamw") opt = std::make_unique<t5x::AdamW>(wc);
    else opt = std::make_unique<t5x::Adafactor>(ac);
    t5x::OptimizerState st = opt->init(params);
    for (int64_t s = 0; s < o.warmup + o.steps; ++s) {
      t5x::Batch b = synthetic_batch(rng, o, cfg.vocab_size);
      if (s == o.warmup) t5x::op_profile_reset();
      auto t0 = Clock::now();
      const double c0 = cpu_seconds();
      // A dropout key means training (MoE: train capacity factor); dropout itself is 0.
      const t5x::PRNGKey key = t5x::prng_key(s);
      auto vg = t5x::value_and_grad([&](const t5x::ParamTree& p) { return model.loss_fn(p, b, key).first; }, params);
      final_loss = vg.value.item();
      auto t1 = Clock::now();
      opt->apply_gradient(params, st, vg.grads, o.optimizer == "adamw" ? 1e-4 : 0.01);
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
    if (cfg.is_moe()) {
      const t5x::bench::MoeDims md = moe_dims(cfg, o.batch, o.inputs, o.targets);
      const t5x::bench::MoeStepFlops mf = t5x::bench::moe_train_flops(dims, md, f.train);
      extra_json = moe_json(md, mf, f.train);
      flops = mf.active;
    } else {
      char b[64];
      std::snprintf(b, sizeof b, ",\"dense_gflop_per_step\":%.9g", f.train / 1e9);
      extra_json = b;
    }
    tokens = double(o.batch * (o.inputs + o.targets));
  } else {
    t5x::NoGradGuard ng;
    // The decode layout of the parameters, made once as `t5x infer` makes it
    // for all its batches (reported apart, as ms_decode_params).
    const auto tp = Clock::now();
    const t5x::ParamTree decode_params = model.decode_params(params);
    char b[128];
    std::snprintf(b, sizeof b, ",\"ms_decode_params\":%.2f,\"greedy\":\"%s\"",
                  std::chrono::duration<double, std::milli>(Clock::now() - tp).count(),
                  o.topk > 0 ? (o.full_logits ? "topk_full_logits" : "topk_candidates")
                  : o.full_logits ? "full_logits" : "greedy_tokens");
    extra_json = b;
    for (int64_t s = 0; s < o.warmup + o.steps; ++s) {
      t5x::Array enc = random_tokens(rng, o.batch, o.inputs, cfg.vocab_size);
      if (s == o.warmup) t5x::op_profile_reset();
      auto t0 = Clock::now();
      const double c0 = cpu_seconds();
      auto step = model.cached_step_fn(decode_params, enc, o.targets);
      std::vector<int64_t> in(size_t(o.batch * o.targets), 0);
      if (o.topk > 0) {
        t5x::SamplingOptions so;
        so.topk = o.topk;
        so.eos_id = -1;
        so.rng = t5x::prng_key(s);
        const t5x::Array zeros = t5x::Array::from_ints(t5x::Shape{{"batch", o.batch}, {"length", o.targets}}, in,
                                                       t5x::DType::i32);
        LogitsOnly plain(*step);
        t5x::temperature_sample(zeros, {}, o.full_logits ? static_cast<t5x::DecodeStepFn&>(plain) : *step, so);
      }
      for (int64_t t = 0; o.topk == 0 && t < o.targets; ++t) {
        t5x::Array inputs = t5x::Array::from_ints(t5x::Shape{{"batch", o.batch}, {"length", o.targets}}, in,
                                                  t5x::DType::i32);
        const std::vector<int64_t> at(size_t(o.batch), t);
        const std::vector<int64_t> next =
            o.full_logits ? t5x::argmax(step->logits(inputs, at), "vocab").to_ints() : step->greedy_tokens(inputs, at);
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
  // The FMA peak measured now, on the same threads and vector class (the
  // issue's MFU target is against it; `peak` above is the nominal-clock figure).
  const double fma = t5x::bench::measure_fma_gflops(threads).gflops;
  std::printf(
      "{\"impl\":\"t5x.cpp\",\"mode\":\"%s\",\"model\":\"%s\",\"dtype\":\"%s\",\"batch\":%lld,\"inputs\":%lld,"
      "\"targets\":%lld,\"threads\":%d,\"steps\":%lld,\"ms_median\":%.2f,\"ms_min\":%.2f,\"ms_all\":%s,"
      "\"tokens_per_s_median\":%.1f,\"tokens_per_s_max\":%.1f,\"gflop_per_step\":%.2f,\"naive_gflop_per_step\":%.2f,"
      "\"gflops_median\":%.1f,\"gflops_max\":%.1f,\"peak_gflops_fp32\":%.1f,\"mfu_median\":%.3f,\"mfu_max\":%.3f,"
      "\"fma_gflops_measured\":%.1f,\"mfu_fma_median\":%.3f,\"mfu_fma_max\":%.3f,"
      "\"cpu_ms\":%s,\"ms_value_and_grad\":%s,\"ms_optimizer\":%s,\"peak_rss_mib\":%.1f,\"array_peak_mib\":%.1f,"
      "\"loss\":%.4f,\"loadavg_1min\":%.2f,"
      "\"omp_wait_policy\":\"%s\",\"malloc\":\"%s\",\"malloc_tuning\":%s,\"optimizer\":\"%s\",\"params\":%lld%s}\n",
      o.mode.c_str(), model_name.c_str(), t5x::dtype_name(cfg.dtype), (long long)o.batch, (long long)o.inputs,
      (long long)o.targets, threads, (long long)o.steps, st.median, st.min, json_list(ms).c_str(),
      tokens / (st.median / 1e3), tokens / (st.min / 1e3), flops / 1e9, naive / 1e9,
      flops / 1e9 / (st.median / 1e3), flops / 1e9 / (st.min / 1e3), peak,
      flops / 1e9 / (st.median / 1e3) / peak, flops / 1e9 / (st.min / 1e3) / peak, fma,
      flops / 1e9 / (st.median / 1e3) / fma, flops / 1e9 / (st.min / 1e3) / fma, json_list(cpu_ms).c_str(),
      json_list(ms_grad).c_str(), json_list(ms_update).c_str(), peak_rss_mib(),
      double(t5x::peak_bytes()) / (1024.0 * 1024.0), final_loss, loadavg1(),
      std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "default", t5x::cpu::malloc_in_use(),
      o.malloc_tuning ? "true" : "false",
      o.mode == "train" ? o.optimizer.c_str() : "none",
      (long long)model.num_params(), extra_json.c_str());
  return 0;
}
