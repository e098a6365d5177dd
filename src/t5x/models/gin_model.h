// The one reader from a t5x gin configuration to a model: every command
// (`t5x train`, `t5x eval`, `t5x infer` predict and score, `t5x ckpt`) builds
// its model through read_model_config + make_model.
//
// Reads the model configurable (models.EncoderDecoderModel or
// models.DecoderOnlyModel: z_loss, label_smoothing, loss_normalizing_factor,
// inputs_bidirectional_attention), its module's config (network.T5Config, or
// network.TransformerConfig for decoder-only: vocab_size, dtype, emb_dim,
// num_heads, num_encoder_layers / num_decoder_layers or num_layers, head_dim,
// mlp_dim, mlp_activations, dropout_rate, logits_via_embedding, and this
// port's grouped-query attention: num_kv_heads for the decoder and, in
// T5Config, encoder_num_kv_heads; None = multi-head; a value that does not
// divide num_heads is a GinError at its binding), and the
// decoding defaults (models.*.predict_batch_with_aux.num_decodes,
// decoding.beam_search alpha / eos_id, decoding.temperature_sample
// temperature / topk / topp / eos_id / max_decode_steps). Scopes follow the
// references (`MODEL = @models.EncoderDecoderModel()`, `module = ...`,
// `config = ...`), as gin would call them.
//
// Errors: gin::GinError from the config (file:line of the binding, missing
// macros such as DROPOUT_RATE); std::invalid_argument("[model_from_gin] ...")
// for values this layer rejects (another model class, an activation dtype
// other than float32 / bfloat16 / float16, no MODEL).
#pragma once
#include <memory>
#include <string>

#include "t5x/gin/config.h"
#include "t5x/models/models.h"

namespace t5x {

// The model as gin describes it.
struct ModelConfig {
  bool decoder_only = false;
  // models.DecoderOnlyModel.inputs_bidirectional_attention: a prefix LM
  // (bidirectional attention over the inputs part of each example).
  bool inputs_bidirectional_attention = false;
  T5Config network;
  LossOptions loss;
  DecodeOptions decode;
  // seqio.SentencePieceVocabulary.sentencepiece_model_file and extra_ids of
  // the model's output_vocabulary (vocabulary for decoder-only); "" when the
  // model names no SentencePiece vocabulary. The run configs check it against
  // the tasks' vocabulary (trainer/run_config.h, check_model_vocabulary).
  std::string vocabulary_file;
  int vocabulary_extra_ids = 0;
};

// From the model reference (e.g. train_script.train.model).
ModelConfig read_model_config(const gin::Config& cfg, const gin::Reference& model_ref);
// From the MODEL macro of configs/models/*.gin, else the `model` of
// train_script.train / eval_script.evaluate / infer_script.infer.
ModelConfig read_model_config(const gin::Config& cfg);

std::unique_ptr<BaseTransformerModel> make_model(const ModelConfig& m);

// Reference helpers shared by the run-config readers: the registry's
// canonical name of a reference (gin accepts shortened names), and the
// reference bound to `param` of `outer`, in the scope it runs in
// (gin::reference_scope). The nested reference must be a call (`@x()`: t5x
// passes an instance); throws gin::GinError at the binding otherwise, and
// when `kinds` is not empty and the reference names none of those
// configurables (canonical names).
std::string canonical_name(const gin::Config& cfg, const gin::Reference& ref);
gin::Reference nested_reference(const gin::Config& cfg, const gin::Reference& outer, const std::string& param,
                                const std::vector<std::string>& kinds = {});

}  // namespace t5x
