// FLOP counts for one T5 encoder-decoder training step or decoding run, the
// same formula for t5x.cpp and its peers (bench/peers/*.py repeat it).
//
// Matmul FLOPs only: a [m, k] x [k, n] product is 2·m·k·n, training is 3x the
// forward (forward + two backward products), so a kernel of P parameters that
// multiplies T tokens costs 6·P·T per step. Per stack:
//   encoder: every layer's q/k/v/out and MLP kernels  x  input tokens (B·Li)
//   decoder: self-attention q/k/v/out, cross-attention q/out, MLP kernels and
//            the logits kernel  x  target tokens (B·Lt); cross-attention k/v
//            kernels  x  input tokens (they project the encoder output)
//   attention: per attention layer and sequence, QK^T and PV are
//            2·(2·Lq·Lk·heads·head_dim) forward, x3 for training (full square,
//            no causal discount)
// Embedding lookups, norms, softmax, elementwise work and the optimizer are
// not counted. `naive_train` = 6 x all parameters x all tokens (B·(Li+Lt)),
// the figure people often quote; it is reported for comparison only.
#pragma once
#include <cstdint>

namespace t5x::bench {

struct T5Dims {
  int64_t vocab = 32128, embed = 512, heads = 6, head_dim = 64, mlp = 1024;
  int64_t enc_layers = 8, dec_layers = 8, mlp_inputs = 2;  // gated GELU: wi_0, wi_1
  bool logits_via_embedding = false;
};

struct StepFlops {
  double train = 0;        // honest count above (training step)
  double naive_train = 0;  // 6 x params x (B·(Li+Lt))
  double params = 0;
};

inline StepFlops t5_train_flops(const T5Dims& d, int64_t batch, int64_t in_len, int64_t tgt_len) {
  const double e = double(d.embed), hk = double(d.heads * d.head_dim);
  const double attn_qo = 2 * e * hk, attn_kv = 2 * e * hk;
  const double mlp = double(d.mlp_inputs + 1) * e * double(d.mlp);
  const double logits = d.logits_via_embedding ? e * double(d.vocab) : e * double(d.vocab);
  const double Ti = double(batch * in_len), Tt = double(batch * tgt_len);
  auto attn = [&](double lq, double lk) { return 3.0 * 2.0 * (2.0 * lq * lk * hk) * double(batch); };
  StepFlops f;
  double enc = double(d.enc_layers) * (6 * (attn_qo + attn_kv + mlp) * Ti + attn(double(in_len), double(in_len)));
  double dec = double(d.dec_layers) * (6 * (attn_qo + attn_kv + attn_qo + mlp) * Tt + 6 * attn_kv * Ti +
                                       attn(double(tgt_len), double(tgt_len)) + attn(double(tgt_len), double(in_len)));
  f.train = enc + dec + 6 * logits * Tt;
  // All parameters: layers, norms, relpos tables, the embedding and (untied) logits.
  double enc_p = double(d.enc_layers) * (attn_qo + attn_kv + mlp + 2 * e) + e + double(d.heads) * 32;
  double dec_p = double(d.dec_layers) * (2 * (attn_qo + attn_kv) + mlp + 3 * e) + e + double(d.heads) * 32;
  f.params = enc_p + dec_p + e * double(d.vocab) + (d.logits_via_embedding ? 0 : e * double(d.vocab));
  f.naive_train = 6 * f.params * (Ti + Tt);
  return f;
}

// Mixture-of-Experts layers (nn::moe_block, t5x contrib/moe) on top of
// t5_train_flops, per training step. A sparse layer replaces its stack's MLP
// for the same tokens T = G·S (G groups of S tokens; C = expert capacity,
// E experts, k = experts per token, M = embed, P = the MLP's kernel
// parameters (mlp_inputs + 1)·M·F):
//   router        6·T·M·E          logits einsum; gradients to x and the kernel
//   dispatch      2·2·G·S·E·C·M    [G,S,M] x [G,S,E,C] -> [G,E,C,M]; forward and
//                                  the gradient to x (the {0,1} mask is constant)
//   combine       3·2·G·S·E·C·M    [G,E,C,M] x [G,S,E,C] -> [G,S,M]; gradients to
//                                  the expert outputs and to the router weights
//   experts       6·P·k·T          active: the k experts each token is routed to;
//                                  t5_train_flops counted the dense MLP (6·P_dense·T)
//                                  there, so `experts` adds 6·T·(k·P - P_dense):
//                                  0 for top-1 with expert_mlp = mlp
// `active` = the dense count + router + dispatch + combine + experts. The
// experts run over all G·E·C slots, full or not, so `executed` = active +
// 6·P·(G·E·C - k·T) (the capacity factor's slack). `active` counts every
// token as routed, also those dropped past capacity (tokens-choose routers;
// experts-choose fills every slot, so `executed` is its count). Batch-prioritised
// routing's [G,S,S] permutation products are not counted.
struct MoeStack {
  int64_t sparse_layers = 0, groups = 0, group_size = 0, capacity = 0;
};
struct MoeDims {
  int64_t experts = 0, selected = 1, expert_mlp = 0;
  MoeStack enc, dec;
};
struct MoeStepFlops {
  double router = 0, dispatch_combine = 0, experts = 0, capacity_slack = 0;
  double active = 0, executed = 0;  // totals per step, including the dense count
};

inline MoeStepFlops moe_train_flops(const T5Dims& d, const MoeDims& m, double dense_train) {
  const double M = double(d.embed), E = double(m.experts);
  const double P = double(d.mlp_inputs + 1) * M * double(m.expert_mlp);
  const double P_dense = double(d.mlp_inputs + 1) * M * double(d.mlp);
  MoeStepFlops f;
  for (const MoeStack* s : {&m.enc, &m.dec}) {
    const double n = double(s->sparse_layers), G = double(s->groups), S = double(s->group_size);
    const double C = double(s->capacity), T = G * S;
    f.router += n * 6 * T * M * E;
    f.dispatch_combine += n * (2 + 3) * 2 * G * S * E * C * M;
    f.experts += n * 6 * T * (double(m.selected) * P - P_dense);
    f.capacity_slack += n * 6 * P * (G * E * C - double(m.selected) * T);
  }
  f.active = dense_train + f.router + f.dispatch_combine + f.experts;
  f.executed = f.active + f.capacity_slack;
  return f;
}

// Greedy decoding of `steps` tokens per row after encoding `in_len` inputs:
// the encoder forward (2·P·T + attention), the cross-attention k/v projection,
// and per step the decoder layers + logits on one token per row with
// attention over the cache (prefix of length t+1) and the encoder output.
inline double t5_decode_flops(const T5Dims& d, int64_t batch, int64_t in_len, int64_t steps) {
  const double e = double(d.embed), hk = double(d.heads * d.head_dim);
  const double mlp = double(d.mlp_inputs + 1) * e * double(d.mlp);
  const double B = double(batch), Li = double(in_len);
  double f = double(d.enc_layers) * (2 * (4 * e * hk + mlp) * B * Li + 2 * 2 * Li * Li * hk * B);
  f += double(d.dec_layers) * 2 * (2 * e * hk) * B * Li;  // cross k/v
  for (int64_t t = 0; t < steps; ++t) {
    f += double(d.dec_layers) * (2 * (6 * e * hk + mlp) * B + 2 * 2 * double(t + 1) * hk * B + 2 * 2 * Li * hk * B);
    f += 2 * e * double(d.vocab) * B;
  }
  return f;
}

}  // namespace t5x::bench
