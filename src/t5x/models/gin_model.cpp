#include "t5x/models/gin_model.h"

#include <stdexcept>

namespace t5x {

namespace {

DType dtype_from(const std::string& s) {
  if (s == "float32") return DType::f32;
  if (s == "bfloat16") return DType::bf16;
  if (s == "float16") return DType::f16;
  throw std::invalid_argument("[model_from_gin] unsupported activation dtype '" + s +
                              "' (float32, bfloat16, float16)");
}

}  // namespace

ModelSpec model_spec_from_gin(const gin::Config& g) {
  ModelSpec m;
  bool dec_only = !g.bound_params("", "network.TransformerConfig").empty();
  m.kind = dec_only ? ModelSpec::Kind::decoder_only : ModelSpec::Kind::encoder_decoder;
  const char* net = dec_only ? "network.TransformerConfig" : "network.T5Config";
  const char* model = dec_only ? "models.DecoderOnlyModel" : "models.EncoderDecoderModel";
  T5Config& c = m.config;
  c.vocab_size = g.get_int("", net, "vocab_size");
  c.dtype = dtype_from(g.get_string("", net, "dtype"));
  c.emb_dim = g.get_int("", net, "emb_dim");
  c.num_heads = g.get_int("", net, "num_heads");
  if (dec_only) {
    c.num_encoder_layers = 0;
    c.num_decoder_layers = g.get_int("", net, "num_layers");
  } else {
    c.num_encoder_layers = g.get_int("", net, "num_encoder_layers");
    c.num_decoder_layers = g.get_int("", net, "num_decoder_layers");
  }
  c.head_dim = g.get_int("", net, "head_dim");
  c.mlp_dim = g.get_int("", net, "mlp_dim");
  c.mlp_activations.clear();
  for (const auto& v : g.get_list("", net, "mlp_activations")) c.mlp_activations.push_back(v.as_string());
  c.dropout_rate = g.get_double("", net, "dropout_rate");
  c.logits_via_embedding = g.get_bool("", net, "logits_via_embedding");

  m.loss.z_loss = g.get_double("", model, "z_loss");
  m.loss.label_smoothing = g.get_double("", model, "label_smoothing");
  gin::Value lnf = g.get("", model, "loss_normalizing_factor");
  if (lnf.is_none()) m.loss.loss_normalizing_factor = {};
  else if (lnf.kind() == gin::ValueKind::kString) m.loss.loss_normalizing_factor = LossNormalizingFactor::parse(lnf.as_string());
  else m.loss.loss_normalizing_factor = LossNormalizingFactor::constant(lnf.as_double());
  if (dec_only) m.inputs_bidirectional_attention = g.get_bool("", model, "inputs_bidirectional_attention");

  m.decode.beam.alpha = g.get_double("", "decoding.beam_search", "alpha");
  m.decode.beam.eos_id = g.get_int("", "decoding.beam_search", "eos_id");
  m.decode.beam.num_decodes = g.get_int("", std::string(model) + ".predict_batch_with_aux", "num_decodes");
  m.decode.sampling.temperature = g.get_double("", "decoding.temperature_sample", "temperature");
  m.decode.sampling.topk = g.get_int("", "decoding.temperature_sample", "topk");
  m.decode.sampling.topp = g.get_double("", "decoding.temperature_sample", "topp");
  m.decode.sampling.eos_id = g.get_int("", "decoding.temperature_sample", "eos_id");
  m.decode.sampling.num_decodes = m.decode.beam.num_decodes;
  if (!g.is_none("", "decoding.temperature_sample", "max_decode_steps"))
    m.decode.sampling.max_decode_steps = g.get_int("", "decoding.temperature_sample", "max_decode_steps");
  return m;
}

std::unique_ptr<BaseTransformerModel> make_model(const ModelSpec& s) {
  if (s.kind == ModelSpec::Kind::decoder_only)
    return std::make_unique<DecoderOnlyModel>(s.config, s.loss, s.inputs_bidirectional_attention);
  return std::make_unique<EncoderDecoderModel>(s.config, s.loss);
}

}  // namespace t5x
