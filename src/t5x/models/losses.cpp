#include "t5x/models/losses.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "ops/ops.h"

namespace t5x {

LossNormalizingFactor LossNormalizingFactor::parse(const std::string& text) {
  std::string t = text;
  std::string low;
  for (char c : t) low += char(std::tolower(static_cast<unsigned char>(c)));
  for (const char* p : {"specialossnormalizingfactor.", "speciallossnormalizingfactor."})
    if (low.rfind(p, 0) == 0) low = low.substr(std::string(p).size());
  if (low.empty() || low == "none") return {};
  if (low == "num_real_target_tokens") return {Kind::num_real_target_tokens, 0};
  if (low == "num_total_target_tokens") return {Kind::num_total_target_tokens, 0};
  if (low == "average_per_sequence") return {Kind::average_per_sequence, 0};
  try {
    size_t used = 0;
    double v = std::stod(t, &used);
    if (used == t.size() && v > 0) return constant(v);
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("[loss_normalizing_factor] '" + text +
                              "' is not None, a positive number, NUM_REAL_TARGET_TOKENS, "
                              "NUM_TOTAL_TARGET_TOKENS or AVERAGE_PER_SEQUENCE");
}

std::string LossNormalizingFactor::to_string() const {
  switch (kind) {
    case Kind::none: return "None";
    case Kind::constant: return std::to_string(value);
    case Kind::num_real_target_tokens: return "NUM_REAL_TARGET_TOKENS";
    case Kind::num_total_target_tokens: return "NUM_TOTAL_TARGET_TOKENS";
    case Kind::average_per_sequence: return "AVERAGE_PER_SEQUENCE";
  }
  return "?";
}

namespace {
const Array& need(const Batch& b, const char* key) {
  auto it = b.find(key);
  if (it == b.end() || !it->second.valid())
    throw std::invalid_argument(std::string("[loss] batch has no feature '") + key + "'");
  return it->second;
}
Array opt(const Batch& b, const char* key) {
  auto it = b.find(key);
  return it == b.end() ? Array() : it->second;
}
Array as_f32(const Array& a) { return a.dtype() == DType::f32 ? a : cast(a, DType::f32); }
}  // namespace

std::pair<std::optional<double>, Array> loss_normalizing_factor_and_weights(const LossNormalizingFactor& lnf,
                                                                            const Batch& batch) {
  using K = LossNormalizingFactor::Kind;
  Array w = opt(batch, "decoder_loss_weights");
  if (w.valid()) w = as_f32(w);
  if (lnf.kind == K::none) return {std::nullopt, w};
  if (lnf.kind == K::constant) return {lnf.value, w};
  const Array& targets = need(batch, "decoder_target_tokens");
  if (!w.valid()) w = cast(gt(targets, 0.0), DType::f32);
  if (lnf.kind == K::num_real_target_tokens) return {sum(w).item(), w};
  if (lnf.kind == K::num_total_target_tokens) return {double(targets.size()), w};
  // AVERAGE_PER_SEQUENCE: divide each token's weight by its sequence's (or,
  // when packed, its segment's) weight sum.
  Array seg = opt(batch, "decoder_segment_ids");
  int64_t nb = w.dim("batch"), nl = w.dim("length");
  auto wv = transpose(w, {"batch", "length"}).to_floats();
  std::vector<int64_t> sv = seg.valid() ? transpose(seg, {"batch", "length"}).to_ints()
                                        : std::vector<int64_t>(size_t(nb * nl), 1);
  std::vector<float> out(wv.size());
  for (int64_t b = 0; b < nb; ++b) {
    std::map<int64_t, double> sums;
    for (int64_t l = 0; l < nl; ++l) sums[sv[size_t(b * nl + l)]] += wv[size_t(b * nl + l)];
    for (int64_t l = 0; l < nl; ++l) {
      double s = sums[sv[size_t(b * nl + l)]];
      double v = s != 0.0 ? wv[size_t(b * nl + l)] / s : 0.0;
      out[size_t(b * nl + l)] = std::isfinite(v) ? float(v) : 0.0f;
    }
  }
  Array nw = Array::from_vector(Shape{{"batch", nb}, {"length", nl}}, out);
  return {sum(nw).item(), nw};
}

LossOutput compute_weighted_cross_entropy(const Array& logits, const Array& targets, const Array& weights,
                                          double z_loss, double label_smoothing, std::optional<double> lnf) {
  CrossEntropy ce = softmax_cross_entropy_with_integer_labels(as_f32(logits), targets, z_loss, label_smoothing);
  LossOutput o;
  Array loss = ce.loss, zl = ce.z_loss;
  if (weights.valid()) {
    Array w = as_f32(weights);
    loss = mul(loss, w);
    zl = mul(zl, w);
    o.weights = w;
  } else {
    o.weights = Array::ones(Shape{{"batch", targets.dim("batch")}, {"length", targets.dim("length")}});
  }
  o.loss = sum(loss);
  o.z_loss = sum(stop_gradient(zl));
  if (lnf) {
    o.loss = div(o.loss, *lnf);
    o.z_loss = div(o.z_loss, *lnf);
  }
  return o;
}

LossOutput t5x_loss(const Array& logits, const Batch& batch, const LossOptions& opts) {
  auto [factor, weights] = loss_normalizing_factor_and_weights(opts.loss_normalizing_factor, batch);
  return compute_weighted_cross_entropy(logits, need(batch, "decoder_target_tokens"), weights, opts.z_loss,
                                        opts.label_smoothing, factor);
}

Metrics compute_base_metrics(const Array& logits, const Array& targets, const Array& weights, const LossOutput& out,
                             const Array& segment_ids) {
  NoGradGuard ng;
  Metrics m;
  double num_examples = double(targets.dim("batch"));
  double num_tokens = double(targets.size());
  Array w = weights.valid() ? as_f32(weights) : Array::ones(targets.shape());
  double nonpad = sum(w).item();
  Array correct = cast(eq(argmax(logits, "vocab"), cast(targets, DType::i32)), DType::f32);
  m["accuracy"] = Metric::average(sum(mul(correct, w)).item(), nonpad);
  double loss = out.loss.item();
  m["loss"] = Metric::step(loss);
  m["loss_per_nonpadding_target_token"] = Metric::average(loss, nonpad);
  m["loss_per_all_target_tokens"] = Metric::average(loss, num_tokens);
  m["nonpadding_fraction"] = Metric::average(nonpad, num_tokens);
  if (out.z_loss.valid()) {
    double z = out.z_loss.item();
    m["z_loss"] = Metric::step(z);
    m["z_loss_per_all_target_tokens"] = Metric::average(z, num_tokens);
    m["cross_ent_loss"] = Metric::step(loss - z);
    m["cross_ent_loss_per_all_target_tokens"] = Metric::average(loss - z, num_tokens);
  }
  m["num_examples"] = Metric::step(num_examples);
  m["num_tokens"] = Metric::step(num_tokens);
  m["num_nonpadding_tokens"] = Metric::step(nonpad);
  if (segment_ids.valid()) {
    // Number of non-zero segments over the batch: seqio packs each example
    // into one run of its id, so count the positions where a run starts.
    // Array ops, so that a batch split over a mesh counts globally.
    const int64_t nl = segment_ids.dim("length");
    auto f32 = [](const Array& b) { return cast(b, DType::f32); };
    const Array first = slice(segment_ids, "length", 0, 1);
    double segments = sum(f32(ne(first, 0.0))).item();
    if (nl > 1) {
      const Array cur = slice(segment_ids, "length", 1, nl - 1), prev = slice(segment_ids, "length", 0, nl - 1);
      segments += sum(mul(f32(ne(cur, prev)), f32(ne(cur, 0.0)))).item();
    }
    m["effective_batch_size/decoder"] = Metric::step(segments);
  }
  return m;
}

}  // namespace t5x
