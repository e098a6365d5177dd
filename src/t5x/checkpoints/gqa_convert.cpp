#include "t5x/checkpoints/gqa_convert.h"

#include <regex>
#include <stdexcept>
#include <vector>

#include "t5x/checkpoints/checkpoint_dir.h"

namespace t5x {

namespace {

void check_divides(int64_t h, int64_t g, const char* what) {
  if (h <= 0)
    throw std::invalid_argument("[convert-gqa] num_heads = " + std::to_string(h) +
                                " must be positive (the source model's number of attention heads)");
  if (g <= 0 || h % g != 0)
    throw std::invalid_argument(std::string("[convert-gqa] ") + what + " = " + std::to_string(g) +
                                " must divide num_heads = " + std::to_string(h) +
                                " (1: multi-query; num_heads: multi-head)");
}

}  // namespace

std::vector<float> mean_pool_kv_heads(const std::vector<float>& w, int64_t embed, int64_t num_heads,
                                      int64_t head_dim, int64_t num_kv_heads) {
  check_divides(num_heads, num_kv_heads, "num_kv_heads");
  const int64_t group = num_heads / num_kv_heads;
  std::vector<float> out(size_t(embed * num_kv_heads * head_dim), 0.0f);
  for (int64_t e = 0; e < embed; ++e)
    for (int64_t g = 0; g < num_kv_heads; ++g)
      for (int64_t d = 0; d < head_dim; ++d) {
        float s = 0.0f;
        for (int64_t j = 0; j < group; ++j) s += w[size_t((e * num_heads + g * group + j) * head_dim + d)];
        out[size_t((e * num_kv_heads + g) * head_dim + d)] = s / float(group);
      }
  return out;
}

GqaConvertResult convert_gqa_checkpoint(const std::string& ckpt_dir, const std::string& model_dir,
                                        const GqaConvertOptions& opt) {
  check_divides(opt.num_heads, opt.num_kv_heads, "num_kv_heads");
  if (opt.encoder_num_kv_heads != 0) check_divides(opt.num_heads, opt.encoder_num_kv_heads, "encoder_num_kv_heads");
  CheckpointReader r = CheckpointReader::open(ckpt_dir);
  GqaConvertResult res;
  res.step = opt.step ? *opt.step : r.step().value_or(0);
  static const std::regex kv_kernel(R"(target/(encoder|decoder)/.*/(key|value)/kernel)");
  // A wrong num_heads still divides embed * head_dim most of the time, and
  // the kernels would be pooled over the wrong columns without an error; the
  // relative position biases ([heads, buckets]) give the real head count.
  for (const char* rel : {"target/encoder/relpos_bias/rel_embedding", "target/decoder/relpos_bias/rel_embedding"}) {
    if (!r.has(rel)) continue;
    const auto shape = r.info(rel).shape;
    if (!shape.empty() && shape[0] != opt.num_heads)
      throw CheckpointError(r.dir() + ": `" + rel + "` has " + std::to_string(shape[0]) +
                            " heads, but num_heads = " + std::to_string(opt.num_heads) +
                            "\n  hint: give the model's --num_heads=" + std::to_string(shape[0]) +
                            " (or its --gin_file)");
  }
  std::vector<SaveLeaf> leaves;
  for (const auto& p : r.array_paths()) {
    if (p.rfind("state/param_states/", 0) == 0) ++res.dropped_optimizer;
    if (p.rfind("target/", 0) != 0) continue;
    std::smatch m;
    const bool kv = std::regex_match(p, m, kv_kernel);
    const int64_t g = !kv ? 0 : m[1] == "encoder" ? opt.encoder_num_kv_heads : opt.num_kv_heads;
    if (g == 0 || g == opt.num_heads) {
      leaves.push_back(SaveLeaf::whole(p, r.read(p)));
      ++res.copied;
      continue;
    }
    const auto info = r.info(p);
    if (info.shape.size() != 2 || info.shape[1] % opt.num_heads != 0)
      throw CheckpointError(r.dir() + ": `" + p + "` has shape " + HostTensor{info.dtype, info.shape, {}}.shape_string() +
                            ", not a multi-head [embed, num_heads * head_dim] with num_heads = " +
                            std::to_string(opt.num_heads) +
                            "\n  hint: convert the multi-head checkpoint (this one may already be grouped), and give "
                            "the model's num_heads");
    const int64_t embed = info.shape[0], head_dim = info.shape[1] / opt.num_heads;
    HostTensor pooled = HostTensor::from_values<float>(
        "float32", {embed, g, head_dim},
        mean_pool_kv_heads(r.read(p, std::nullopt, "float32").values<float>(), embed, opt.num_heads, head_dim, g));
    if (info.dtype != "float32") pooled = cast_host_tensor(pooled, info.dtype);
    leaves.push_back(SaveLeaf::whole(p, std::move(pooled)));
    ++res.pooled;
  }
  if (res.pooled + res.copied == 0)
    throw CheckpointError(r.dir() + ": checkpoint has no target/ parameters");
  res.dir = save_converted_checkpoint(model_dir, res.step, std::move(leaves), opt.compressor, opt.durable);
  return res;
}

}  // namespace t5x
