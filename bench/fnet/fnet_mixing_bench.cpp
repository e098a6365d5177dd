// FNet's Fourier mixing sublayer (ops/fourier.h, FFTW) against T5
// self-attention (nn/attention.h: query/key/value projections, the fused
// attention kernel, output projection; no mask) at the same batch and embed,
// forward only, over lengths 128, 256, ... (doubling). Also times the
// attention core alone (q, k, v given), which is the part that grows with
// length squared, and FNet's other mixing path, the DFT as two products with
// the cos / sin matrices (fourier_mix_reference; f_net's use_fft=False, which
// the paper finds faster on TPU for short sequences). Prints one row per
// length and the crossovers: the first length from which the FFT mixing is
// faster than attention (and stays so), and than the DFT products.
//
//   t5x_fnet_mixing_bench [--batch=1] [--embed=512] [--heads=8] [--min_length=128]
//                         [--max_length=8192] [--min_seconds=1.0]
//
// Times are the median of repeated runs, each case repeated until it has run
// for --min_seconds (at least 3 runs; 1 run past 20 s).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/params.h"
#include "ops/ops.h"

namespace {
using namespace t5x;

double median_seconds(const std::function<void()>& f, double min_seconds) {
  std::vector<double> t;
  double total = 0;
  while (t.size() < 3 || total < min_seconds) {
    auto a = std::chrono::steady_clock::now();
    f();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
    t.push_back(s);
    total += s;
    if (s > 20.0) break;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int64_t flag(int argc, char** argv, const std::string& name, int64_t dflt) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--" + name + "=", 0) == 0) return std::atoll(a.c_str() + name.size() + 3);
  }
  return dflt;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t B = flag(argc, argv, "batch", 1), E = flag(argc, argv, "embed", 512), H = flag(argc, argv, "heads", 8);
  const int64_t lo = flag(argc, argv, "min_length", 128), hi = flag(argc, argv, "max_length", 8192);
  double min_seconds = 1.0;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--min_seconds=", 0) == 0) min_seconds = std::atof(argv[i] + 14);
  if (E % H != 0) {
    std::fprintf(stderr, "t5x_fnet_mixing_bench: --embed=%lld must be a multiple of --heads=%lld\n", (long long)E,
                 (long long)H);
    return 64;
  }
  nn::AttentionConfig cfg;
  cfg.num_heads = H;
  cfg.head_dim = E / H;
  ParamTree p = nn::init_params(nn::attention_param_specs("attention", E, cfg), prng_key(0));
  nn::Dropout no_dropout;
  NoGradGuard no_grad;
  std::printf("# forward, f32, batch=%lld embed=%lld heads=%lld head_dim=%lld; seconds per call (median)\n",
              (long long)B, (long long)E, (long long)H, (long long)(E / H));
  std::printf("%8s %12s %12s %12s %12s %10s %10s\n", "length", "fourier_mix", "dft_matmul", "attention",
              "attn_core", "attn/mix", "core/mix");
  int64_t crossover = -1, core_crossover = -1, dft_crossover = -1;
  auto track = [](int64_t& c, bool faster, int64_t L) { c = faster ? (c < 0 ? L : c) : -1; };
  for (int64_t L = lo; L <= hi; L *= 2) {
    Array x = normal(prng_key(1), Shape{{"batch", B}, {"length", L}, {"embed", E}});
    Array q = nn::project_query(p, "attention", x, cfg);
    auto [k, v] = nn::project_key_value(p, "attention", x, cfg);
    const double mix = median_seconds([&] { (void)fourier_mix(x).raw_data(); }, min_seconds);
    const double dft = median_seconds([&] { (void)fourier_mix_reference(x).raw_data(); }, min_seconds);
    const double att = median_seconds(
        [&] { (void)nn::multi_head_attention(p, "attention", x, x, {}, Array(), cfg, no_dropout).raw_data(); },
        min_seconds);
    const double core =
        median_seconds([&] { (void)nn::attend(q, k, v, {}, Array(), cfg, no_dropout).raw_data(); }, min_seconds);
    std::printf("%8lld %12.6f %12.6f %12.6f %12.6f %10.2f %10.2f\n", (long long)L, mix, dft, att, core, att / mix,
                core / mix);
    std::fflush(stdout);
    track(crossover, mix < att, L);
    track(core_crossover, mix < core, L);
    track(dft_crossover, mix < dft, L);
  }
  auto say = [&](const char* what, int64_t c) {
    if (c == lo)
      std::printf("crossover (%s): FFT mixing faster at every length measured (from %lld)\n", what, (long long)lo);
    else if (c > 0)
      std::printf("crossover (%s): FFT mixing faster from length %lld on\n", what, (long long)c);
    else
      std::printf("crossover (%s): none up to length %lld (the other side faster at the longest)\n", what,
                  (long long)hi);
  };
  say("full attention sublayer", crossover);
  say("attention core", core_crossover);
  say("DFT as matrix products", dft_crossover);
  return 0;
}
