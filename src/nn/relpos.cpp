#include "nn/relpos.h"

#include <cmath>
#include <limits>
#include <vector>

#include "ops/index.h"

namespace t5x::nn {

int32_t relative_position_bucket(int64_t relative_position, bool bidirectional, const RelposConfig& cfg) {
  int64_t ret = 0;
  int64_t n = -relative_position;
  int64_t nb = cfg.num_buckets;
  if (bidirectional) {
    nb /= 2;
    if (n < 0) ret += nb;
    n = n < 0 ? -n : n;
  } else {
    n = n < 0 ? 0 : n;
  }
  int64_t max_exact = nb / 2;
  if (n < max_exact) return int32_t(ret + n);
  const float eps = std::numeric_limits<float>::epsilon();
  float v = std::log(float(n) / float(max_exact) + eps) / std::log(float(cfg.max_distance) / float(max_exact)) *
            float(nb - max_exact);
  int64_t large = max_exact + int64_t(v);
  if (large > nb - 1) large = nb - 1;
  return int32_t(ret + large);
}

Array relative_position_buckets(int64_t q_len, int64_t k_len, bool bidirectional, const RelposConfig& cfg,
                                int64_t q_offset) {
  std::vector<int32_t> b(size_t(q_len * k_len));
  for (int64_t i = 0; i < q_len; ++i)
    for (int64_t j = 0; j < k_len; ++j)
      b[size_t(i * k_len + j)] = relative_position_bucket(j - (i + q_offset), bidirectional, cfg);
  return Array::from_vector(Shape{{"length", q_len}, {"kv_length", k_len}}, b);
}

Array relative_position_buckets_at(const Array& index, int64_t k_len, bool bidirectional, const RelposConfig& cfg) {
  auto idx = index.to_ints();
  int64_t batch = int64_t(idx.size());
  std::vector<int32_t> b(size_t(batch * k_len));
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t j = 0; j < k_len; ++j)
      b[size_t(r * k_len + j)] = relative_position_bucket(j - idx[size_t(r)], bidirectional, cfg);
  return Array::from_vector(Shape{{"batch", batch}, {"length", 1}, {"kv_length", k_len}}, b);
}

Array relative_position_bias(const Array& table, const Array& buckets) {
  return take(table, buckets, "relpos_buckets");
}

}  // namespace t5x::nn
