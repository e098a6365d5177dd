// Writes one train state of a tiny scalable_t5 model (4 heads of 8, two
// layers a stack, Adafactor with beta1 under standard_logical_factor_rules,
// three updates with drawn gradients so that every slot holds values) twice:
// OUT/scanned/checkpoint_3 in t5x's scalable_t5 layout with scan_layers, and
// OUT/per_layer/checkpoint_3 as the model holds it, and the Hugging Face
// export of each (OUT/hf_scanned, OUT/hf_per_layer). scripts/check/
// ckpt_scalable_layout.py compares them with numpy.
// Usage: t5x_write_scalable_for_python OUT
#include <cstdio>
#include <string>

#include "core/random.h"
#include "ops/random.h"
#include "t5x/checkpoints/hf_convert.h"
#include "t5x/gin/config.h"
#include "t5x/gin/registry.h"
#include "t5x/models/gin_model.h"
#include "t5x/optim/adafactor.h"
#include "t5x/trainer/train_state.h"

using namespace t5x;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  gin::Config cfg(&gin::Registry::global());
  cfg.parse_string(R"(from __gin__ import dynamic_registration
from t5x import models
from t5x.examples.scalable_t5 import network
MODEL = @models.EncoderDecoderModel()
models.EncoderDecoderModel.module = @network.Transformer()
network.Transformer.config = @network.T5Config()
network.T5Config:
  vocab_size = 96
  emb_dim = 32
  num_heads = 4
  num_encoder_layers = 2
  num_decoder_layers = 2
  head_dim = 8
  mlp_dim = 64
  mlp_activations = ('gelu', 'linear')
  dropout_rate = 0.0
  scan_layers = True
)",
                   "scalable_tiny.gin");
  const ModelConfig mc = read_model_config(cfg);
  auto model = make_model(mc);
  AdafactorConfig ac;
  ac.beta1 = 0.9;
  ac.logical_factor_rules = standard_logical_factor_rules();
  ac.factor_by_rule = [](const std::string& p) { return scalable_t5_relaid(p, 2, true); };
  const Adafactor opt(ac);
  trainer::TrainState st;
  st.params = model->init(prng_key(3));
  st.opt = opt.init(st.params);
  for (uint64_t s = 0; s < 3; ++s) {
    ParamTree grads;
    uint32_t i = 0;
    for (const auto& [k, v] : st.params) grads[k] = normal(fold_in(prng_key(int64_t(100 + s)), i++), v.shape());
    opt.apply_gradient(st.params, st.opt, grads, 0.01);
  }
  trainer::SaveCheckpointConfig save;
  trainer::SaveContext ctx;
  ctx.durable = false;
  trainer::save_train_state(out + "/scanned", st, save, std::nullopt, ctx, trainer::checkpoint_layout(*model, &opt));
  trainer::save_train_state(out + "/per_layer", st, save, std::nullopt, ctx);
  // Hugging Face exports of both (`t5x ckpt export-hf`'s function): the same tensors.
  export_hf_t5(out + "/scanned/checkpoint_3", out + "/hf_scanned", "float32", trainer::checkpoint_layout(*model, nullptr));
  export_hf_t5(out + "/per_layer/checkpoint_3", out + "/hf_per_layer", "float32");
  return 0;
}
