// `t5x ckpt convert-gqa`'s conversion (gqa_convert.h) on a tiny T5
// checkpoint: key / value kernels mean-pooled per group (checked against
// means computed here), everything else copied bitwise, the optimizer state
// dropped, the step kept, a bfloat16 kernel pooled in float32 and stored
// back in bfloat16, and clear errors.
#include "t5x/checkpoints/gqa_convert.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "t5_test_shapes.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "../../common/tmpdir.h"

namespace t5x {
namespace {

namespace fs = std::filesystem;

using t5x_test::tmpdir;

constexpr int64_t kEmb = 8, kHeads = 4, kHeadDim = 3;
const std::string kBf16 = "decoder/layers_1/encoder_decoder_attention/value/kernel";

NamedTensors save_tiny(const std::string& model_dir) {
  auto params = testing_util::random_params(testing_util::t5_param_shapes(40, kEmb, kHeads, kHeadDim, 16, 2, 2, true, false));
  std::vector<SaveLeaf> leaves;
  for (const auto& [n, t] : params)
    leaves.push_back(SaveLeaf::whole("target/" + n, n == kBf16 ? cast_host_tensor(t, "bfloat16") : t));
  leaves.push_back(SaveLeaf::inline_array("state/step", HostTensor::from_values<int32_t>("int32", {}, {1000})));
  leaves.push_back(SaveLeaf::inline_array("state/param_states/decoder/layers_0/self_attention/key/kernel/v_row",
                                          HostTensor::zeros("float32", {kEmb})));
  SaveOptions opt;
  opt.durable = false;
  opt.save_dtype = "";  // keep the bfloat16 kernel bfloat16
  save_checkpoint(model_dir, 1000, leaves, opt);
  return params;
}

// The pooled kernel written out by hand: [e, g, d] = mean over the group's heads.
std::vector<float> expected_pool(const std::vector<float>& w, int64_t g) {
  const int64_t group = kHeads / g;
  std::vector<float> out;
  for (int64_t e = 0; e < kEmb; ++e)
    for (int64_t k = 0; k < g; ++k)
      for (int64_t d = 0; d < kHeadDim; ++d) {
        float s = 0;
        for (int64_t j = 0; j < group; ++j) s += w[size_t(e * kHeads * kHeadDim + (k * group + j) * kHeadDim + d)];
        out.push_back(s / float(group));
      }
  return out;
}

TEST(GqaConvert, PoolingIsTheGroupMean) {
  // Heads of 3 values: head h holds h*10 + d in every row; groups of 2 -> means 5+d and 25+d.
  std::vector<float> w;
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t d = 0; d < 3; ++d) w.push_back(float(h * 10 + d + e * 100));
  EXPECT_EQ(mean_pool_kv_heads(w, 2, 4, 3, 2),
            (std::vector<float>{5, 6, 7, 25, 26, 27, 105, 106, 107, 125, 126, 127}));
  EXPECT_EQ(mean_pool_kv_heads(w, 2, 4, 3, 1), (std::vector<float>{15, 16, 17, 115, 116, 117}));
  EXPECT_EQ(mean_pool_kv_heads(w, 2, 4, 3, 4), w);
  EXPECT_THROW(mean_pool_kv_heads(w, 2, 4, 3, 3), std::invalid_argument);
}

TEST(GqaConvert, TinyCheckpointDecoderPooledRestCopied) {
  const std::string root = tmpdir("tiny");
  const NamedTensors src = save_tiny(root + "/mha");
  for (int64_t g : {1, 2}) {
    for (int64_t enc_g : {0, 2}) {
      SCOPED_TRACE("num_kv_heads " + std::to_string(g) + ", encoder " + std::to_string(enc_g));
      GqaConvertOptions o;
      o.num_heads = kHeads;
      o.num_kv_heads = g;
      o.encoder_num_kv_heads = enc_g;
      o.durable = false;
      const std::string out = root + "/g" + std::to_string(g) + "_e" + std::to_string(enc_g);
      GqaConvertResult r = convert_gqa_checkpoint(root + "/mha/checkpoint_1000", out, o);
      EXPECT_EQ(r.dir, out + "/checkpoint_1000");
      EXPECT_EQ(r.step, 1000);
      EXPECT_EQ(r.dropped_optimizer, 1);
      EXPECT_EQ(r.pooled, 2 * 2 * 2 + (enc_g ? 2 * 2 : 0));  // 2 layers x (self, cross) x (key, value) [+ encoder]
      EXPECT_EQ(validate_checkpoint(r.dir), std::nullopt);
      CheckpointReader rd = CheckpointReader::open(r.dir);
      EXPECT_EQ(rd.step(), 1000);
      EXPECT_FALSE(rd.has("state/param_states/decoder/layers_0/self_attention/key/kernel/v_row"));
      int64_t pooled = 0;
      for (const auto& [name, t] : src) {
        const std::string path = "target/" + name;
        ASSERT_TRUE(rd.has(path)) << path;
        const bool kv = name.find("/key/kernel") != std::string::npos || name.find("/value/kernel") != std::string::npos;
        const int64_t want_g = !kv ? 0 : name.rfind("encoder/", 0) == 0 ? enc_g : g;
        HostTensor got = rd.read(path);
        if (want_g == 0) {
          HostTensor want = name == kBf16 ? cast_host_tensor(t, "bfloat16") : t;
          EXPECT_TRUE(got == want) << path << " is not a copy";
          continue;
        }
        ++pooled;
        EXPECT_EQ(got.shape, (std::vector<int64_t>{kEmb, want_g, kHeadDim})) << path;
        if (name == kBf16) {
          // Pooled in float32 from the stored bfloat16 values, stored as bfloat16.
          EXPECT_EQ(got.dtype, "bfloat16");
          HostTensor src_bf = cast_host_tensor(cast_host_tensor(t, "bfloat16"), "float32");
          HostTensor want = cast_host_tensor(
              HostTensor::from_values<float>("float32", got.shape, expected_pool(src_bf.values<float>(), want_g)),
              "bfloat16");
          EXPECT_TRUE(got == want) << path;
        } else {
          EXPECT_EQ(got.dtype, "float32");
          EXPECT_EQ(got.values<float>(), expected_pool(t.values<float>(), want_g)) << path;
        }
      }
      EXPECT_EQ(pooled, r.pooled);
    }
  }
  // Clear errors: a G that does not divide H; a grouped checkpoint; an existing output.
  GqaConvertOptions o;
  o.num_heads = kHeads;
  o.num_kv_heads = 3;
  try {
    convert_gqa_checkpoint(root + "/mha/checkpoint_1000", root + "/bad", o);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("num_kv_heads = 3 must divide num_heads = 4"), std::string::npos) << e.what();
  }
  // A wrong num_heads that still divides embed * head_dim (2 of 4 heads of 3)
  // was pooled over the wrong columns without an error.
  o.num_heads = 2;
  o.num_kv_heads = 1;
  try {
    convert_gqa_checkpoint(root + "/mha/checkpoint_1000", root + "/wrong_heads", o);
    FAIL() << "expected an error";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("relpos_bias/rel_embedding` has 4 heads, but num_heads = 2"), std::string::npos) << m;
    EXPECT_NE(m.find("--num_heads=4"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(root + "/wrong_heads/checkpoint_1000"));
  o.num_heads = kHeads;
  o.num_kv_heads = 2;
  // --step=-1 wrote checkpoint_-1; 2^32 + 5 wrote state/step 5 in checkpoint_4294967301.
  for (int64_t step : {int64_t(-1), (int64_t(1) << 32) + 5}) {
    o.step = step;
    try {
      convert_gqa_checkpoint(root + "/mha/checkpoint_1000", root + "/bad_step", o);
      FAIL() << "expected an error for step " << step;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("step " + std::to_string(step) + " is outside [0, 2^31 - 1]"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(root + "/bad_step"));
  o.step.reset();
  try {
    convert_gqa_checkpoint(root + "/g1_e0/checkpoint_1000", root + "/again", o);
    FAIL() << "expected an error";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("/key/kernel` has shape (8, 1, 3)"), std::string::npos) << m;
    EXPECT_NE(m.find("already be grouped"), std::string::npos) << m;
  }
  EXPECT_THROW(convert_gqa_checkpoint(root + "/mha/checkpoint_1000", root + "/g2_e0", o), CheckpointError);
  fs::remove_all(fs::path(root).parent_path());
}

}  // namespace
}  // namespace t5x
