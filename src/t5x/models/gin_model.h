// Builds models from t5x gin configurations (configs/models/*.gin): reads
// network.T5Config (encoder-decoder) or network.TransformerConfig
// (decoder-only), the loss settings of models.EncoderDecoderModel /
// models.DecoderOnlyModel and the decoding defaults of decoding.beam_search /
// decoding.temperature_sample. Errors are gin::GinError from the config
// (file:line of the binding, missing macros such as DROPOUT_RATE), or
// std::invalid_argument("[model_from_gin] ...") for values this layer rejects.
#pragma once
#include <memory>

#include "t5x/gin/config.h"
#include "t5x/models/models.h"

namespace t5x {

struct ModelSpec {
  enum class Kind { encoder_decoder, decoder_only };
  Kind kind = Kind::encoder_decoder;
  T5Config config;
  LossOptions loss;
  bool inputs_bidirectional_attention = false;  // decoder-only
  DecodeOptions decode;
};

ModelSpec model_spec_from_gin(const gin::Config& config);
std::unique_ptr<BaseTransformerModel> make_model(const ModelSpec& spec);

}  // namespace t5x
