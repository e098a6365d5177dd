// t5x's GPU copy of the T5 network (t5x/contrib/gpu/t5/network.py): its gin
// names reach the T5 network's configurables, and its one addition,
// scale_attn_logits, divides the query projection's input by sqrt(head_dim).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/ops.h"
#include "t5x/gin/config.h"
#include "t5x/models/gin_model.h"
#include "t5x/models/models.h"
#include "t5x/models/network.h"
#include "gin_test_util.h"
#include "test_util.h"

namespace t5x {
namespace {

using testing::small_test_config;
using testing::tokens;

// The model part of t5x/contrib/gpu/t5/t5_1_1/base.gin, as its files write it.
const char* kGpuModelGin = R"(
from __gin__ import dynamic_registration
from t5x import models
from t5x.contrib.gpu.t5 import network

MODEL = @models.EncoderDecoderModel()
models.EncoderDecoderModel.module = @network.Transformer()
network.Transformer.config = @network.T5Config()
network.T5Config:
  vocab_size = 32128
  dtype = 'bfloat16'
  emb_dim = 768
  num_heads = 12
  num_encoder_layers = 12
  num_decoder_layers = 12
  head_dim = 64
  mlp_dim = 2048
  mlp_activations = ('gelu', 'linear')
  dropout_rate = 0.0
  logits_via_embedding = False
  scale_attn_logits = True
)";

TEST(GpuNetwork, ItsGinFilesBindTheT5Network) {
  gin::Config cfg(&testing::t5x_registry());
  cfg.parse_string(kGpuModelGin, "gpu_base.gin");
  // A command-line binding after the files, with no import: the suffix
  // names the T5 network under either module path.
  cfg.parse_string("network.T5Config.num_decoder_layers = 4", "<bindings>");
  const ModelConfig m = read_model_config(cfg);
  EXPECT_FALSE(m.decoder_only);
  EXPECT_EQ(m.network.emb_dim, 768);
  EXPECT_EQ(m.network.num_heads, 12);
  EXPECT_EQ(m.network.num_decoder_layers, 4);
  EXPECT_EQ(m.network.dtype, DType::bf16);
  EXPECT_TRUE(m.network.scale_attn_logits);
  T5Config base = t5_1_1_config("base");
  base.num_decoder_layers = 4;
  EXPECT_EQ(make_model(m)->num_params(), EncoderDecoderModel(base).num_params());
  // The operative config keeps the file's names under its import.
  const std::string op = cfg.operative_config_str();
  EXPECT_NE(op.find("from t5x.contrib.gpu.t5 import network"), std::string::npos) << op;
  EXPECT_NE(op.find("network.T5Config.scale_attn_logits = True"), std::string::npos) << op;
  EXPECT_EQ(op.find("t5x.examples.t5"), std::string::npos) << op;
  // The default is T5's (t5x's GPU network: "Default to False for adafactor").
  EXPECT_FALSE(testing::load_model_gin("t5_1_1/small.gin", {"DROPOUT_RATE = 0.0"}).network.scale_attn_logits);
}

// scale_attn_logits computes q = (x / sqrt(d)) W_q: the logits of query
// kernels divided by sqrt(d), up to rounding; and not those of the unscaled model.
TEST(GpuNetwork, ScaleAttnLogitsDividesTheQueryInput) {
  T5Config plain = small_test_config();
  plain.head_dim = 9;  // sqrt(9) = 3: an exact divisor
  T5Config scaled = plain;
  scaled.scale_attn_logits = true;
  const ParamTree p = EncoderDecoderModel(plain).init(prng_key(5));
  ParamTree folded = p;
  for (auto& [name, a] : folded)
    if (name.ends_with("/query/kernel")) a = div(a, 3.0);
  const Batch b = testing::enc_dec_batch();
  const Array with_scale = EncoderDecoderModel(scaled).logits(p, b);
  const Array folded_kernels = EncoderDecoderModel(plain).logits(folded, b);
  const Array unscaled = EncoderDecoderModel(plain).logits(p, b);
  EXPECT_LT(max_abs_diff(with_scale, folded_kernels), 1e-5);
  EXPECT_GT(max_abs_diff(with_scale, unscaled), 1e-3);
  // The cached decode step scales its queries too.
  nn::Dropout none;
  const Array enc = b.at("encoder_input_tokens");
  Array encoded = t5_encode(scaled, p, enc, Array(), none);
  DecoderCache cache = t5_init_decoder_cache(scaled, p, encoded, enc, 5);
  const Array step = t5_decode_step(scaled, p, cache, Array::from_ints(Shape{{"batch", 2}}, {0, 0}));
  const Array want = transpose(slice(with_scale, "length", 0, 1), {"batch", "length", "vocab"});
  EXPECT_LT(max_abs_diff(step, reshape(want, step.shape())), 1e-5);
}

}  // namespace
}  // namespace t5x
