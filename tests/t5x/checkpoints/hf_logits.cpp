// Writes t5x.cpp's teacher-forced logits of a checkpoint on fixed inputs, for
// hf_roundtrip_check.py to compare with transformers' on the exported model.
//
//   t5x_ckpt_hf_logits --gin_file=MODEL_DIR/config.gin [--gin.NAME=V ...] CKPT OUT.safetensors
//
// OUT holds encoder_input_tokens / decoder_input_tokens / decoder_target_tokens
// (int32 [batch=2, length]) and logits (float32 [batch, length, vocab]). Row 1
// of the encoder input is padded with zeros, so the padding masks are checked.
#include <iostream>
#include <string>
#include <vector>

#include "t5x/checkpoints/safetensors.h"
#include "t5x/gin/flags.h"
#include "t5x/models/gin_model.h"
#include "t5x/trainer/train_state.h"

int main(int argc, char** argv) {
  using namespace t5x;
  try {
    std::vector<std::string> rest;
    gin::GinFlags flags = gin::parse_gin_flags({argv + 1, argv + argc}, &rest);
    if (rest.size() != 2 || flags.files.empty()) {
      std::cerr << "usage: t5x_ckpt_hf_logits --gin_file=F [--gin.NAME=V ...] CKPT OUT.safetensors\n";
      return 64;
    }
    gin::Config cfg = gin::load_gin_config(flags, &gin::Registry::global(), /*skip_unknown=*/true);
    ModelConfig spec = read_model_config(cfg);
    spec.network.dtype = DType::f32;
    spec.network.dropout_rate = 0.0;
    auto model = make_model(spec);
    trainer::TrainState st;
    st.params = model->init(prng_key(0));
    trainer::restore_train_state(rest[0], st, false, "", 0, 1);

    const int64_t V = spec.network.vocab_size, B = 2, Le = 7, Ld = 5;
    std::vector<int64_t> enc, din, dtg;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t i = 0; i < Le; ++i) enc.push_back(b == 1 && i >= 4 ? 0 : 2 + (37 * (b * Le + i) + 11) % (V - 2));
      std::vector<int64_t> t;
      for (int64_t i = 0; i < Ld; ++i) t.push_back(2 + (53 * (b * Ld + i) + 5) % (V - 2));
      t.back() = 1;  // EOS
      dtg.insert(dtg.end(), t.begin(), t.end());
      din.push_back(0);
      din.insert(din.end(), t.begin(), t.end() - 1);
    }
    Batch batch{{"encoder_input_tokens", Array::from_ints(Shape{{"batch", B}, {"length", Le}}, enc)},
                {"decoder_input_tokens", Array::from_ints(Shape{{"batch", B}, {"length", Ld}}, din)},
                {"decoder_target_tokens", Array::from_ints(Shape{{"batch", B}, {"length", Ld}}, dtg)}};
    Array logits = model->logits(st.params, batch);
    NamedTensors out;
    for (const char* k : {"encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens"})
      out.emplace_back(k, trainer::to_host(batch.at(k)));
    out.emplace_back("logits", trainer::to_host(logits));
    write_safetensors(rest[1], out, {{"format", "pt"}});
    std::cout << "wrote logits " << logits.shape().to_string() << " to " << rest[1] << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "t5x_ckpt_hf_logits: " << e.what() << "\n";
    return 1;
  }
}
