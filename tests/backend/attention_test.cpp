// Fused attention against a materialised reference (the plain-op
// decomposition: logits, mask bias, softmax, weighted sum) and its gradients,
// plus finite differences of the kernel itself.
#include "backend/cpu/attention.h"

#include <omp.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "test_util.h"

namespace t5x::cpu {
namespace {
using testing::random_vec;

struct Config {
  const char* name = "";
  AttentionShape s;
  bool causal = false, bias = false, batch_bias = false, segments = false, q_mask = false,
       kv_mask = false;
  float scale = 1.f;
};
// gtest prints a parameter this way in a failure (otherwise: the raw bytes).
void PrintTo(const Config& c, std::ostream* os) {
  *os << c.name << " batch=" << c.s.batch << " q_length=" << c.s.q_length
      << " kv_length=" << c.s.kv_length << " heads=" << c.s.heads << " kv_heads=" << c.s.kv_heads
      << " head_dim=" << c.s.head_dim;
}

struct Inputs {
  std::vector<float> q, k, v, bias, dout;
  std::vector<int32_t> qseg, kvseg;
  std::vector<uint8_t> qm, kvm;
  AttentionParams p;
};

Inputs make_inputs(const Config& c, uint32_t seed) {
  const AttentionShape& s = c.s;
  Inputs in;
  in.q = random_vec(s.batch * s.q_length * s.heads * s.head_dim, seed, -1, 1);
  in.k = random_vec(s.batch * s.kv_length * s.kv_heads * s.head_dim, seed + 1, -1, 1);
  in.v = random_vec(s.batch * s.kv_length * s.kv_heads * s.head_dim, seed + 2, -1, 1);
  in.dout = random_vec(in.q.size(), seed + 3, -1, 1);
  in.p.causal = c.causal;
  in.p.scale = c.scale;
  if (c.bias) {
    int64_t n = (c.batch_bias ? s.batch : 1) * s.heads * s.q_length * s.kv_length;
    in.bias = random_vec(n, seed + 4, -2, 2);
    in.p.bias = in.bias.data();
    in.p.bias_layout = c.batch_bias ? AttentionBiasLayout::kBatchHeads : AttentionBiasLayout::kHeads;
  }
  if (c.segments) {
    // Two packed sequences then padding (segment 0), different per batch row.
    auto fill = [&](std::vector<int32_t>& seg, int64_t L) {
      seg.resize(size_t(s.batch * L));
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t i = 0; i < L; ++i)
          seg[size_t(b * L + i)] = i < L * (2 + b) / 5 ? 1 : i < L * 4 / 5 ? 2 : 0;
    };
    fill(in.qseg, s.q_length);
    fill(in.kvseg, s.kv_length);
    in.p.q_segment_ids = in.qseg.data();
    in.p.kv_segment_ids = in.kvseg.data();
  }
  if (c.q_mask) {
    in.qm.assign(size_t(s.batch * s.q_length), 1);
    for (int64_t b = 0; b < s.batch; ++b) in.qm[size_t(b * s.q_length + (3 + b) % s.q_length)] = 0;
    in.p.q_mask = in.qm.data();
  }
  if (c.kv_mask) {
    in.kvm.assign(size_t(s.batch * s.kv_length), 1);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = s.kv_length - 1 - b; j < s.kv_length; ++j) in.kvm[size_t(b * s.kv_length + j)] = 0;
    in.p.kv_mask = in.kvm.data();
  }
  return in;
}

struct Reference {
  std::vector<double> out, lse, dq, dk, dv, dbias;
  std::vector<double> max_logit, log_sum;  // per row: lse = max_logit + log_sum
};

// Materialised logits in f32 exactly as flax adds them, softmax and
// gradients in double.
Reference reference(const AttentionShape& s, const Inputs& in) {
  const AttentionParams& p = in.p;
  int64_t B = s.batch, Lq = s.q_length, Lk = s.kv_length, H = s.heads, Hk = s.kv_heads,
          D = s.head_dim, G = H / Hk;
  Reference r;
  r.out.assign(in.q.size(), 0);
  r.dq.assign(in.q.size(), 0);
  r.dk.assign(in.k.size(), 0);
  r.dv.assign(in.v.size(), 0);
  r.lse.assign(size_t(B * H * Lq), 0);
  r.max_logit.assign(size_t(B * H * Lq), 0);
  r.log_sum.assign(size_t(B * H * Lq), 0);
  r.dbias.assign(in.bias.size(), 0);
  auto Q = [&](int64_t b, int64_t i, int64_t h) { return &in.q[size_t(((b * Lq + i) * H + h) * D)]; };
  auto K = [&](const std::vector<float>& x, int64_t b, int64_t j, int64_t h) {
    return &x[size_t(((b * Lk + j) * Hk + h) * D)];
  };
  std::vector<double> P(static_cast<size_t>(Lk));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Lq; ++i) {
        int64_t hk = h / G;
        std::vector<float> logit(static_cast<size_t>(Lk));
        for (int64_t j = 0; j < Lk; ++j) {
          double qk = 0;
          for (int64_t d = 0; d < D; ++d) qk += double(Q(b, i, h)[d]) * K(in.k, b, j, hk)[d];
          bool ok = true;
          if (p.causal && j > i + (Lk - Lq)) ok = false;
          if (p.q_mask && !p.q_mask[b * Lq + i]) ok = false;
          if (p.kv_mask && !p.kv_mask[b * Lk + j]) ok = false;
          if (p.q_segment_ids) {
            int32_t a = p.q_segment_ids[b * Lq + i];
            if (a == 0 || a != p.kv_segment_ids[b * Lk + j]) ok = false;
          }
          float mb = ok ? 0.f : -1e10f;
          float bias = 0.f;
          if (p.bias) {
            int64_t hb = p.bias_layout == AttentionBiasLayout::kBatchHeads ? b * H + h : h;
            bias = p.bias[(hb * Lq + i) * Lk + j];
          }
          logit[size_t(j)] = float(float(p.scale) * float(qk)) + (mb + bias);
        }
        double mx = -1e300, sum = 0;
        for (float x : logit) mx = std::max(mx, double(x));
        for (int64_t j = 0; j < Lk; ++j) sum += (P[size_t(j)] = std::exp(logit[size_t(j)] - mx));
        for (auto& x : P) x /= sum;
        r.lse[size_t((b * H + h) * Lq + i)] = mx + std::log(sum);
        r.max_logit[size_t((b * H + h) * Lq + i)] = mx;
        r.log_sum[size_t((b * H + h) * Lq + i)] = std::log(sum);
        double* o = &r.out[size_t(((b * Lq + i) * H + h) * D)];
        const float* g = &in.dout[size_t(((b * Lq + i) * H + h) * D)];
        for (int64_t j = 0; j < Lk; ++j)
          for (int64_t d = 0; d < D; ++d) o[d] += P[size_t(j)] * K(in.v, b, j, hk)[d];
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += g[d] * o[d];
        for (int64_t j = 0; j < Lk; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < D; ++d) dp += g[d] * double(K(in.v, b, j, hk)[d]);
          double ds = P[size_t(j)] * (dp - delta);
          for (int64_t d = 0; d < D; ++d) {
            r.dq[size_t(((b * Lq + i) * H + h) * D + d)] += p.scale * ds * K(in.k, b, j, hk)[d];
            r.dk[size_t(((b * Lk + j) * Hk + hk) * D + d)] += p.scale * ds * Q(b, i, h)[d];
            r.dv[size_t(((b * Lk + j) * Hk + hk) * D + d)] += P[size_t(j)] * g[d];
          }
          if (p.bias) {
            int64_t hb = p.bias_layout == AttentionBiasLayout::kBatchHeads ? b * H + h : h;
            r.dbias[size_t((hb * Lq + i) * Lk + j)] += ds;
          }
        }
      }
  return r;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
}

class AttentionVsReference : public ::testing::TestWithParam<Config> {};

// Both ways the backward gets the statistics of rows with no allowed key:
// from the forward's logl output (what the op does), or recomputed.
TEST_P(AttentionVsReference, ForwardAndBackward) {
  Config c = GetParam();
  const AttentionShape& s = c.s;
  Inputs in = make_inputs(c, 7);
  Reference r = reference(s, in);
  for (const bool with_logl : {false, true}) {
    SCOPED_TRACE(with_logl ? "logl from the forward" : "logl recomputed");
    const size_t rows = size_t(s.batch * s.heads * s.q_length);
    std::vector<float> out(in.q.size()), lse(rows), logl(rows, -1.f);
    attention_forward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(),
                      with_logl ? logl.data() : nullptr);
    expect_close(out, r.out, 2e-5, "out");
    expect_close(lse, r.lse, 2e-6, "lse");
    int masked_rows = 0;
    if (with_logl)
      for (size_t i = 0; i < rows; ++i) {
        if (r.max_logit[i] > -1e9) {
          EXPECT_EQ(logl[i], 0.f) << i;
          continue;
        }
        // A row with no allowed key: lse = its max logit, logl its log-sum.
        ++masked_rows;
        EXPECT_EQ(double(lse[i]), r.max_logit[i]) << i;
        EXPECT_NEAR(logl[i], r.log_sum[i], 1e-5) << i;
      }
    if (with_logl && (c.q_mask || std::string(c.name) == "MoreQueriesThanKeysCausal")) {
      EXPECT_GT(masked_rows, 0) << "the case has rows with no allowed key";
    }
    std::vector<float> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), db(in.bias.size());
    attention_backward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(),
                       in.dout.data(), dq.data(), dk.data(), dv.data(),
                       in.bias.empty() ? nullptr : db.data(), with_logl ? logl.data() : nullptr);
    expect_close(dq, r.dq, 1e-4, "dq");
    expect_close(dk, r.dk, 1e-4, "dk");
    expect_close(dv, r.dv, 1e-4, "dv");
    if (!in.bias.empty()) expect_close(db, r.dbias, 1e-4, "dbias");
  }
}

Config cfg(const char* name, int64_t B, int64_t Lq, int64_t Lk, int64_t H, int64_t Hk,
           int64_t D) {
  Config c;
  c.name = name;
  c.s = AttentionShape{B, Lq, Lk, H, Hk, D};
  return c;
}
Config with(Config c, void (*f)(Config&)) {
  f(c);
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, AttentionVsReference,
    ::testing::Values(
        cfg("PlainGqa", 2, 5, 7, 4, 2, 8),
        with(cfg("T5DecoderCausalBias", 2, 100, 100, 2, 2, 16),
             [](Config& c) { c.causal = c.bias = true; }),
        with(cfg("MqaBatchBiasKvMaskScale", 1, 70, 130, 3, 1, 20),
             [](Config& c) { c.bias = c.batch_bias = c.kv_mask = true; c.scale = 0.25f; }),
        with(cfg("PackedSegmentsCausal", 2, 100, 100, 2, 1, 16),
             [](Config& c) { c.causal = c.segments = c.bias = true; }),
        with(cfg("PaddedQueriesCausal", 2, 70, 70, 2, 2, 64),
             [](Config& c) { c.causal = c.q_mask = true; }),
        with(cfg("DecodeLikeCausal", 2, 3, 70, 4, 2, 64), [](Config& c) { c.causal = true; }),
        // The first 30 queries see no key at all (uniform rows) next to normal rows.
        with(cfg("MoreQueriesThanKeysCausal", 1, 100, 70, 2, 2, 8),
             [](Config& c) { c.causal = c.bias = true; })),
    [](const ::testing::TestParamInfo<Config>& info) { return std::string(info.param.name); });

TEST(Attention, FullyMaskedRowIsUniformAverage) {
  Config c = cfg("", 1, 100, 100, 1, 1, 4);
  c.causal = c.q_mask = true;  // q row 3 masked; tile 0 also skips kv tile 1 causally
  Inputs in = make_inputs(c, 3);
  std::vector<float> out(in.q.size()), lse(100);
  attention_forward(c.s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
  for (int64_t d = 0; d < 4; ++d) {
    double mean = 0;
    for (int64_t j = 0; j < 100; ++j) mean += in.v[size_t(j * 4 + d)] / 100.0;
    EXPECT_NEAR(out[size_t(3 * 4 + d)], mean, 1e-5);
  }
  EXPECT_NEAR(lse[3], -1e10 + std::log(100.0), 1e3);
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  Config c = cfg("", 1, 6, 9, 2, 1, 4);
  c.bias = c.causal = true;
  c.scale = 0.5f;
  Inputs in = make_inputs(c, 11);
  const AttentionShape& s = c.s;
  std::vector<float> out(in.q.size()), lse(size_t(s.heads * s.q_length));
  attention_forward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
  std::vector<float> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), db(in.bias.size());
  attention_backward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(),
                     in.dout.data(), dq.data(), dk.data(), dv.data(), db.data());
  auto f = [&] {
    in.p.bias = in.bias.data();
    attention_forward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), nullptr);
    return testing::dot(out, in.dout);
  };
  testing::check_grad_fd(in.q, dq, f, 48, 1e-2, 2e-2, 2e-3, "dq");
  testing::check_grad_fd(in.k, dk, f, 36, 1e-2, 2e-2, 2e-3, "dk");
  testing::check_grad_fd(in.v, dv, f, 36, 1e-2, 2e-2, 2e-3, "dv");
  testing::check_grad_fd(in.bias, db, f, 108, 1e-2, 2e-2, 2e-3, "dbias");
}

TEST(Attention, ThreadCountDoesNotChangeResults) {
  Config c = cfg("", 2, 70, 70, 4, 2, 16);
  c.bias = c.causal = true;
  Inputs in = make_inputs(c, 5);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> out(in.q.size()), lse(2 * 4 * 70), dq(in.q.size()), dk(in.k.size()),
        dv(in.v.size()), db(in.bias.size());
    attention_forward(c.s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
    attention_backward(c.s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(),
                       in.dout.data(), dq.data(), dk.data(), dv.data(), db.data());
    out.insert(out.end(), dq.begin(), dq.end());
    out.insert(out.end(), dk.begin(), dk.end());
    out.insert(out.end(), db.begin(), db.end());
    return out;
  };
  int saved = omp_get_max_threads();
  auto a = run(1), b = run(3);
  omp_set_num_threads(saved);
  EXPECT_EQ(a, b);
}

// The dq pass reads the dlogit tiles the dk/dv pass kept, or recomputes them
// (large problems): the same bits, with causal skips, GQA, segments, both bias
// layouts and rows with no allowed key.
TEST(Attention, KeptAndRecomputedDlogitTilesGiveTheSameBits) {
  std::vector<Config> cases = {cfg("causal_bias_gqa", 2, 100, 100, 4, 2, 16),
                               cfg("segments_batch_bias", 2, 70, 130, 3, 1, 20),
                               cfg("no_allowed_key", 1, 100, 70, 2, 2, 8)};
  cases[0].causal = cases[0].bias = true;
  cases[1].segments = cases[1].bias = cases[1].batch_bias = true;
  cases[2].causal = cases[2].bias = true;
  for (const Config& c : cases) {
    Inputs in = make_inputs(c, 23);
    const AttentionShape& s = c.s;
    std::vector<float> out(in.q.size()), lse(size_t(s.batch * s.heads * s.q_length));
    attention_forward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
    auto grads = [&] {
      std::vector<float> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), db(in.bias.size());
      attention_backward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(),
                         in.dout.data(), dq.data(), dk.data(), dv.data(), db.data());
      dq.insert(dq.end(), dk.begin(), dk.end());
      dq.insert(dq.end(), dv.begin(), dv.end());
      dq.insert(dq.end(), db.begin(), db.end());
      return dq;
    };
    const std::vector<float> kept = grads();
    std::vector<float> recomputed;
    {
      ScopedAttentionStashLimit none(0);
      recomputed = grads();
    }
    ASSERT_EQ(kept.size(), recomputed.size());
    EXPECT_EQ(0, std::memcmp(kept.data(), recomputed.data(), kept.size() * sizeof(float))) << c.name;
    double mag = 0;  // not vacuous: the gradients are not all zero
    for (float x : kept) mag = std::max(mag, double(std::fabs(x)));
    EXPECT_GT(mag, 1e-3) << c.name;
  }
}

// bf16 q, k and v (bf16 activations, a decode cache in the activation dtype)
// are widened as the tiles load them: the forward's and the backward's bits of
// the f32 kernel on the widened copies, with the dlogit tiles kept or
// recomputed, and with the rows that have no allowed key recomputed from q and
// k (no logl).
TEST(Attention, Bf16QueriesKeysAndValuesGiveTheBitsOfTheirWidenedCopies) {
  std::vector<Config> cases = {cfg("causal_bias_gqa", 2, 100, 100, 4, 2, 16), cfg("segments", 2, 33, 75, 3, 3, 20),
                               cfg("no_allowed_key", 1, 70, 50, 2, 2, 64), cfg("decode", 3, 1, 37, 6, 6, 64),
                               cfg("decode_gqa", 2, 5, 130, 4, 2, 64)};
  cases[0].causal = cases[0].bias = true;
  cases[1].segments = cases[1].bias = cases[1].batch_bias = true;
  cases[1].scale = 0.125f;
  cases[2].causal = cases[2].bias = true;
  cases[3].kv_mask = cases[3].bias = true;
  cases[4].causal = cases[4].segments = true;
  auto narrow = [](std::vector<float>& x) {
    std::vector<bfloat16> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      r[i] = bfloat16(x[i]);
      x[i] = float(r[i]);
    }
    return r;
  };
  for (const Config& c : cases) {
    Inputs in = make_inputs(c, 29);
    const std::vector<bfloat16> q16 = narrow(in.q), k16 = narrow(in.k), v16 = narrow(in.v);
    const AttentionShape& s = c.s;
    const size_t rows = size_t(s.batch * s.heads * s.q_length);
    std::vector<float> want(in.q.size()), want_lse(rows), want_logl(rows);
    std::vector<float> got(in.q.size()), got_lse(rows), got_logl(rows);
    attention_forward(s, in.p, in.q.data(), in.k.data(), in.v.data(), want.data(), want_lse.data(), want_logl.data());
    attention_forward(s, in.p, q16.data(), k16.data(), v16.data(), got.data(), got_lse.data(), got_logl.data());
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << c.name;
    ASSERT_EQ(0, std::memcmp(want_lse.data(), got_lse.data(), rows * sizeof(float))) << c.name;
    ASSERT_EQ(0, std::memcmp(want_logl.data(), got_logl.data(), rows * sizeof(float))) << c.name;
    {  // not a vacuous pass: the rounding changed the outputs
      Inputs raw = make_inputs(c, 29);
      std::vector<float> unrounded(in.q.size());
      attention_forward(s, raw.p, raw.q.data(), raw.k.data(), raw.v.data(), unrounded.data(), nullptr);
      double diff = 0;
      for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, double(std::fabs(unrounded[i] - got[i])));
      EXPECT_GT(diff, 0.0) << c.name;
    }
    for (int64_t stash : {int64_t(1) << 24, int64_t(0)})
      for (bool with_logl : {true, false}) {
        ScopedAttentionStashLimit limit(stash);
        auto grads = [&](auto* q, auto* k, auto* v) {
          std::vector<float> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), db(in.bias.size());
          attention_backward(s, in.p, q, k, v, want.data(), want_lse.data(), in.dout.data(), dq.data(), dk.data(),
                             dv.data(), db.empty() ? nullptr : db.data(), with_logl ? want_logl.data() : nullptr);
          dq.insert(dq.end(), dk.begin(), dk.end());
          dq.insert(dq.end(), dv.begin(), dv.end());
          dq.insert(dq.end(), db.begin(), db.end());
          return dq;
        };
        const std::vector<float> g32 = grads(in.q.data(), in.k.data(), in.v.data());
        const std::vector<float> g16 = grads(q16.data(), k16.data(), v16.data());
        ASSERT_EQ(0, std::memcmp(g32.data(), g16.data(), g32.size() * sizeof(float)))
            << c.name << " stash=" << stash << " logl=" << with_logl;
        double mag = 0;  // not vacuous: the gradients are not all zero
        for (float x : g16) mag = std::max(mag, double(std::fabs(x)));
        EXPECT_GT(mag, 1e-3) << c.name;
      }
  }
}

// A key tile shorter than a whole one is computed over its keys rounded up to
// 16 columns, not over all 64: the bits of the same keys padded out to whole
// tiles with masked keys (whose probabilities are exactly 0), in the forward
// and in every gradient of the real keys.
TEST(Attention, ShortKeyTileGivesTheBitsOfMaskedPadding) {
  for (int64_t lk : {5, 20, 32, 33, 50, 70}) {
    Config c = cfg("short", 2, 9, lk, 4, 2, 20);
    c.kv_mask = c.bias = true;
    c.scale = 0.5f;
    const Inputs in = make_inputs(c, 31);
    const AttentionShape& s = c.s;
    const int64_t lp = (lk + 63) / 64 * 64, row = s.kv_heads * s.head_dim;
    AttentionShape sp = s;
    sp.kv_length = lp;
    // The padded problem: the same keys, values, mask and bias, then masked
    // keys of other values.
    std::vector<float> kp = random_vec(s.batch * lp * row, 41, -1, 1), vp = random_vec(kp.size(), 42, -1, 1);
    std::vector<float> bp = random_vec(s.heads * s.q_length * lp, 43, -2, 2);
    std::vector<uint8_t> mp(size_t(s.batch * lp), 0);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = 0; j < lk; ++j) {
        std::copy_n(in.k.begin() + (b * lk + j) * row, row, kp.begin() + (b * lp + j) * row);
        std::copy_n(in.v.begin() + (b * lk + j) * row, row, vp.begin() + (b * lp + j) * row);
        mp[size_t(b * lp + j)] = in.kvm[size_t(b * lk + j)];
      }
    for (int64_t hi = 0; hi < s.heads * s.q_length; ++hi)
      std::copy_n(in.bias.begin() + hi * lk, lk, bp.begin() + hi * lp);
    AttentionParams pp = in.p;
    pp.kv_mask = mp.data();
    pp.bias = bp.data();

    const size_t rows = size_t(s.batch * s.heads * s.q_length);
    std::vector<float> out(in.q.size()), lse(rows), outp(in.q.size()), lsep(rows);
    attention_forward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
    attention_forward(sp, pp, in.q.data(), kp.data(), vp.data(), outp.data(), lsep.data());
    EXPECT_EQ(0, std::memcmp(out.data(), outp.data(), out.size() * sizeof(float))) << "lk " << lk;
    EXPECT_EQ(0, std::memcmp(lse.data(), lsep.data(), rows * sizeof(float))) << "lk " << lk;

    std::vector<float> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), db(in.bias.size());
    std::vector<float> dqp(in.q.size()), dkp(kp.size()), dvp(vp.size()), dbp(bp.size());
    attention_backward(s, in.p, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), in.dout.data(),
                       dq.data(), dk.data(), dv.data(), db.data());
    attention_backward(sp, pp, in.q.data(), kp.data(), vp.data(), outp.data(), lsep.data(), in.dout.data(),
                       dqp.data(), dkp.data(), dvp.data(), dbp.data());
    EXPECT_EQ(0, std::memcmp(dq.data(), dqp.data(), dq.size() * sizeof(float))) << "lk " << lk;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = 0; j < lk; ++j) {
        const size_t o = size_t((b * lk + j) * row), op = size_t((b * lp + j) * row);
        EXPECT_EQ(0, std::memcmp(&dk[o], &dkp[op], size_t(row) * sizeof(float))) << "lk " << lk << " key " << j;
        EXPECT_EQ(0, std::memcmp(&dv[o], &dvp[op], size_t(row) * sizeof(float))) << "lk " << lk << " key " << j;
      }
    for (int64_t hi = 0; hi < s.heads * s.q_length; ++hi)
      EXPECT_EQ(0, std::memcmp(&db[size_t(hi * lk)], &dbp[size_t(hi * lp)], size_t(lk) * sizeof(float)))
          << "lk " << lk;
    double mag = 0;  // not vacuous: the gradients are not all zero
    for (float x : dq) mag = std::max(mag, double(std::fabs(x)));
    EXPECT_GT(mag, 1e-3) << "lk " << lk;
  }
}

TEST(Attention, RejectsMisuse) {
  AttentionShape s{1, 2, 2, 3, 2, 4};  // kv_heads does not divide heads
  std::vector<float> x(64);
  try {
    attention_forward(s, {}, x.data(), x.data(), x.data(), x.data(), nullptr);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[attention] kv_heads=2"), std::string::npos);
  }
  s.kv_heads = 1;
  AttentionParams p;
  p.bias = x.data();  // no layout
  EXPECT_THROW(attention_forward(s, p, x.data(), x.data(), x.data(), x.data(), nullptr),
               std::invalid_argument);
  EXPECT_THROW(attention_backward(s, {}, x.data(), x.data(), x.data(), x.data(), nullptr,
                                  x.data(), x.data(), x.data(), x.data(), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace t5x::cpu
