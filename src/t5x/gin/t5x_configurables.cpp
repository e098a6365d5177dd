// The configurables t5x's gin files bind, under t5x's names, with t5x's
// parameter names and (where t5x has one) defaults. Sources: t5x/utils.py,
// t5x/train.py, t5x/eval.py, t5x/infer.py, t5x/trainer.py, t5x/adafactor.py,
// t5x/optimizers.py, t5x/partitioning.py, t5x/models.py, t5x/decoding.py,
// t5x/examples/t5/network.py, t5x/examples/decoder_only/network.py, seqio.
// Behaviour is bound to these names by the layers that own it. Each is also
// registered under gin-config's full name, the module path t5x's gin files
// import it from (see Module), so that names resolve as in gin-config.
#include "t5x/gin/registry.h"

namespace t5x::gin {
namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

// Registers `name` (as t5x's gin files write it) under gin-config's full name
// `module.name`, the module being the path those files import it from
// (`from t5x import utils` -> `t5x.utils.DatasetConfig`; `import seqio` ->
// `seqio.Evaluator`; `import __main__ as train_script` -> `train_script.train`).
struct Module {
  Registry& r;
  std::string path;  // empty: the name is already the full name
  void add(const std::string& name, const Params& params, const std::string& doc = {}) const {
    r.add(name, params, doc, path.empty() ? name : path + "." + name);
  }
};

// Mixture-of-Experts parameters of both network configs (T5Config): names
// of flaxformer's MoeLayer / routers / SparseEncoder (moe.md 2.5-2.6).
Params with_moe(Params p) {
  const Params moe = {{"num_experts", "0"},           {"expert_mlp_dim", "None"},
                      {"router_type", "'tokens_choose_masked'"},
                      {"num_selected_experts", "1"},  {"batch_prioritized_routing", "False"},
                      {"jitter_noise", "0.0"},        {"ignore_padding_tokens", "False"},
                      {"train_capacity_factor", "1.25"}, {"eval_capacity_factor", "2.0"},
                      {"min_expert_capacity", "4"},   {"group_size", "4096"},
                      {"strict_group_size", "False"}, {"num_expert_partitions", "1"},
                      {"expert_init_scale", "1.0"},   {"expert_dtype", "'float32'"}};
  p.insert(p.end(), moe.begin(), moe.end());
  return p;
}

void add_model_configurables(Registry& r) {
  const Module in_t5x{r, "t5x"};
  const Module t5_example{r, "t5x.examples.t5"};
  const Module scalable_example{r, "t5x.examples"};
  const Module decoder_only_example{r, "t5x.examples.decoder_only"};
  const Module in_moe{r, "t5x.contrib.moe"};
  const Module as_written{r, ""};  // seqio, optax, train_script: the name is the full name

  t5_example.add("network.T5Config",
        with_moe({{"vocab_size", ""}, {"dtype", "'float32'"}, {"emb_dim", "512"}, {"num_heads", "8"},
         {"num_encoder_layers", "6"}, {"num_decoder_layers", "6"}, {"head_dim", "64"},
         {"mlp_dim", "2048"}, {"mlp_activations", "('relu',)"}, {"dropout_rate", "0.1"},
         {"logits_via_embedding", "False"}, {"float32_attention_logits", "False"},
         {"num_kv_heads", "None"}, {"encoder_num_kv_heads", "None"}, {"encoder_mixing", "'attention'"},
         {"encoder_mixing_length", "None"}, {"num_encoder_attention_layers", "0"},
         {"encoder_attention_layout", "'TOP'"}, {"num_encoder_sparse_layers", "0"}, {"num_decoder_sparse_layers", "0"},
         {"encoder_sparse_layout", "'MIXED'"}, {"decoder_sparse_layout", "'MIXED'"}, {"relpos_per_layer", "False"},
         {"scale_attn_logits", "False"}}),
        "T5 encoder-decoder hyperparameters (t5x/examples/t5/network.py; num_kv_heads and "
        "encoder_num_kv_heads: grouped-query attention; encoder_mixing = 'fourier': FNet's "
        "Fourier mixing in the encoder, 'linear': Sparse Mixer's (encoder_mixing_length, "
        "num_encoder_attention_layers, encoder_attention_layout: hybrids); num_experts ... expert_dtype: Mixture-of-Experts "
        "feed-forwards (flaxformer architectures/moe); relpos_per_layer: umT5's relative position "
        "table in each layer; this port's additions; scale_attn_logits: t5x/contrib/gpu's)");
  t5_example.add("network.Transformer", {{"config", ""}}, "T5 encoder-decoder network");
  // t5x/contrib/gpu/t5/network.py is a copy of the T5 network whose one
  // addition, scale_attn_logits, is a T5Config parameter above: its gin
  // files (`from t5x.contrib.gpu.t5 import network`) bind the same
  // configurables.
  r.add_alias("t5x.contrib.gpu.t5.network.T5Config", "network.T5Config");
  r.add_alias("t5x.contrib.gpu.t5.network.Transformer", "network.Transformer");
  // t5x/examples/scalable_t5/network.py (mT5, umT5): each layer has its own
  // relative position table (T5Config::relpos_per_layer). Its files write
  // `network.T5Config` after `from t5x.examples.scalable_t5 import network`,
  // or in a file that includes one (Registry::find's `loaded`).
  scalable_example.add("scalable_t5.network.T5Config",
        {{"vocab_size", ""}, {"dtype", "'float32'"}, {"emb_dim", "512"}, {"num_heads", "8"},
         {"num_encoder_layers", "6"}, {"num_decoder_layers", "6"}, {"head_dim", "64"}, {"mlp_dim", "2048"},
         {"mlp_activations", "('relu',)"}, {"dropout_rate", "0.1"}, {"logits_via_embedding", "False"},
         {"remat_policy", "'none'"}, {"scan_layers", "True"}, {"param_scan_axis", "1"}},
        "scalable T5 hyperparameters (t5x/examples/scalable_t5/network.py: a relative position table in "
        "each layer; its checkpoints keep attention heads split and, with scan_layers, the layers stacked at "
        "param_scan_axis)");
  scalable_example.add("scalable_t5.network.Transformer", {{"config", ""}}, "scalable T5 encoder-decoder network");
  r.require_import("scalable_t5.network.T5Config");
  r.require_import("scalable_t5.network.Transformer");
  decoder_only_example.add("network.TransformerConfig",
        with_moe({{"vocab_size", ""}, {"dtype", "'float32'"}, {"emb_dim", "512"}, {"num_heads", "8"},
         {"num_layers", "6"}, {"head_dim", "64"}, {"mlp_dim", "2048"},
         {"mlp_activations", "('relu',)"}, {"dropout_rate", "0.1"},
         {"logits_via_embedding", "False"}, {"num_kv_heads", "None"},
         {"num_sparse_layers", "0"}, {"sparse_layout", "'MIXED'"}, {"relpos_per_layer", "False"}}),
        "decoder-only hyperparameters (t5x/examples/decoder_only/network.py; num_kv_heads: "
        "grouped-query attention; num_experts ... expert_dtype: Mixture-of-Experts feed-forwards; "
        "relpos_per_layer: a relative position table in each layer, as umT5; this port's additions)");
  decoder_only_example.add("network.DecoderWrapper", {{"config", ""}}, "decoder-only network");

  const Params common = {{"module", ""},
                         {"optimizer_def", ""},
                         {"decode_fn", ""},
                         {"feature_converter_cls", ""},
                         {"label_smoothing", "0.0"},
                         {"z_loss", "0.0"},
                         {"loss_normalizing_factor", "None"}};
  Params encdec = common;
  encdec.push_back({"input_vocabulary", ""});
  encdec.push_back({"output_vocabulary", ""});
  in_t5x.add("models.EncoderDecoderModel", encdec, "T5 encoder-decoder model (t5x/models.py)");
  Params dec = common;
  dec.push_back({"vocabulary", ""});
  dec.push_back({"inputs_bidirectional_attention", "False"});
  in_t5x.add("models.DecoderOnlyModel", dec, "decoder-only / prefix-LM model (t5x/models.py)");
  // t5x/contrib/moe/models.py: the same models plus the expert losses' weights.
  for (Params* p : {&encdec, &dec}) {
    p->push_back({"aux_loss_factor", "0.0"});
    p->push_back({"router_z_loss_factor", "0.0"});
  }
  in_moe.add("models.MoeEncoderDecoderModel", encdec, "T5 encoder-decoder Mixture-of-Experts model (t5x/contrib/moe/models.py)");
  in_moe.add("models.MoeDecoderOnlyModel", dec, "decoder-only Mixture-of-Experts model (t5x/contrib/moe/models.py)");
  const Params predict = {{"num_decodes", "1"},
                          {"decoder_params", "None"},
                          {"return_all_decodes", "False"},
                          {"prompt_with_targets", "False"}};
  in_t5x.add("models.EncoderDecoderModel.predict_batch_with_aux", predict);
  in_t5x.add("models.DecoderOnlyModel.predict_batch_with_aux", predict);
  in_moe.add("models.MoeEncoderDecoderModel.predict_batch_with_aux", predict);
  in_moe.add("models.MoeDecoderOnlyModel.predict_batch_with_aux", predict);

  in_t5x.add("decoding.beam_search",
        {{"alpha", "0.6"}, {"max_decode_len", "None"}, {"eos_id", "1"}});
  in_t5x.add("decoding.temperature_sample",
        {{"temperature", "1.0"}, {"topk", "1"}, {"topp", "0.0"}, {"max_decode_steps", "None"},
         {"eos_id", "1"}});

  as_written.add("seqio.SentencePieceVocabulary",
        {{"sentencepiece_model_file", ""}, {"extra_ids", "0"}, {"normalizer_spec_overrides", "None"},
         {"reverse_extra_ids", "True"}});
  as_written.add("seqio.ByteVocabulary", {{"extra_ids", "0"}});
}

void add_optimizer_configurables(Registry& r) {
  const Module in_t5x{r, "t5x"};
  const Module in_moe{r, "t5x.contrib.moe"};
  const Module as_written{r, ""};  // seqio, optax, train_script: the name is the full name

  in_t5x.add("adafactor.Adafactor",
        {{"learning_rate", "None"}, {"factored", "True"}, {"multiply_by_parameter_scale", "True"},
         {"beta1", "None"}, {"decay_rate", "0.8"}, {"step_offset", "0"},
         {"clipping_threshold", "1.0"}, {"weight_decay_rate", "None"},
         {"min_dim_size_to_factor", "128"}, {"epsilon1", "1e-30"}, {"epsilon2", "1e-3"},
         {"dtype_momentum", "'float32'"}, {"factor_map", "None"}, {"logical_factor_rules", "None"},
         {"weight_decay_rate_lr_exponent", "None"}, {"global_norm_clip_threshold", "None"},
         {"max_parameter_scale", "None"}, {"skip_nan_updates", "False"}},
        "T5X Adafactor (t5x/adafactor.py)");
  in_t5x.add("adafactor.standard_logical_factor_rules", {});
  in_moe.add("adafactor_utils.logical_factor_rules", {},
        "standard rules plus the MoE axes: expert BATCH, expert_mlp COL, mlp_embed ROW, unmodeled NONE "
        "(t5x/contrib/moe/adafactor_utils.py)");
  const Params adam = {{"learning_rate", ""}, {"b1", "0.9"},          {"b2", "0.999"},
                       {"eps", "1e-8"},       {"eps_root", "0.0"},    {"mu_dtype", "None"}};
  Params adamw = adam;
  adamw.push_back({"weight_decay", "1e-4"});
  adamw.push_back({"mask", "None"});
  in_t5x.add("optimizers.adamw", adamw, "optax.adamw wrapped for t5x (t5x/optimizers.py)");
  in_t5x.add("optimizers.adam", adam);
  const Params sgd = {{"learning_rate", ""}, {"momentum", "None"}, {"nesterov", "False"},
                      {"accumulator_dtype", "None"}};
  in_t5x.add("optimizers.sgd", sgd, "optax.sgd wrapped for t5x (t5x/optimizers.py)");
  const Params lion = {{"learning_rate", ""}, {"b1", "0.9"},           {"b2", "0.99"},
                       {"mu_dtype", "None"},  {"weight_decay", "1e-3"}, {"mask", "None"}};
  in_t5x.add("optimizers.lion", lion, "optax.lion wrapped for t5x (t5x/optimizers.py)");
  in_t5x.add("optimizers.chain", {{"transformations", ""}});
  as_written.add("optax.adamw", adamw);
  as_written.add("optax.adam", adam);
  as_written.add("optax.sgd", sgd);
  as_written.add("optax.lion", lion);
  as_written.add("optax.clip_by_global_norm", {{"max_norm", ""}});
  as_written.add("optax.clip", {{"max_delta", ""}});
  as_written.add("optax.warmup_cosine_decay_schedule",
        {{"init_value", ""}, {"peak_value", ""}, {"warmup_steps", ""}, {"decay_steps", ""},
         {"end_value", "0.0"}});
  as_written.add("optax.linear_schedule",
        {{"init_value", ""}, {"end_value", ""}, {"transition_steps", ""},
         {"transition_begin", "0"}});
  as_written.add("optax.cosine_decay_schedule",
        {{"init_value", ""}, {"decay_steps", ""}, {"alpha", "0.0"}});
  in_t5x.add("utils.create_learning_rate_scheduler",
        {{"factors", "'constant * linear_warmup * rsqrt_decay'"}, {"base_learning_rate", "0.5"},
         {"warmup_steps", "1000"}, {"decay_factor", "0.5"}, {"steps_per_decay", "20000"},
         {"steps_per_cycle", "100000"}, {"step_offset", "0"}, {"min_learning_rate", "1e-8"}},
        "T5-style factored learning-rate schedule (t5x/utils.py)");
}

void add_run_configurables(Registry& r) {
  const Module in_t5x{r, "t5x"};
  const Module in_moe{r, "t5x.contrib.moe"};
  const Module t5_data{r, "t5.data"};
  const Module as_written{r, ""};  // seqio, optax, train_script: the name is the full name

  in_t5x.add("utils.DatasetConfig",
        {{"mixture_or_task_name", ""}, {"task_feature_lengths", ""}, {"split", ""},
         {"batch_size", ""}, {"shuffle", ""}, {"seed", ""}, {"use_cached", "False"},
         {"pack", "False"}, {"use_custom_packing_ops", "False"}, {"module", "None"},
         {"use_memory_cache", "True"}, {"trim_output_features", "True"}});
  in_t5x.add("utils.SaveCheckpointConfig",
        {{"period", "None"}, {"checkpoint_steps", "None"}, {"dtype", "'float32'"},
         {"keep", "None"}, {"keep_dataset_checkpoints", "None"}, {"save_dataset", "False"},
         {"state_transformation_fns", "()"}, {"checkpointer_cls", "None"}});
  in_t5x.add("utils.RestoreCheckpointConfig",
        {{"path", ""}, {"mode", "'latest'"}, {"assignment_map", "None"}, {"strict", "True"},
         {"fallback_to_scratch", "False"}, {"dtype", "None"}, {"restore_dataset", "False"},
         {"state_transformation_fns", "()"}, {"checkpointer_cls", "None"}});
  in_t5x.add("utils.CheckpointConfig", {{"save", "None"}, {"restore", "None"}});
  in_t5x.add("checkpoints.Checkpointer", {}, "the ordinary checkpointer (t5x/checkpoints.py)");
  in_moe.add("checkpoints.UpcycleCheckpointer", {{"num_experts", ""}},
        "sparse upcycling restore: expert params [E, ...] from E copies of the dense array "
        "(t5x/contrib/moe/checkpoints.py)");

  const Params partitioner = {{"num_partitions", "None"},      {"model_parallel_submesh", "None"},
                              {"params_on_devices", "True"},   {"backend", "None"},
                              {"ici_mesh_shape", "None"},      {"dcn_mesh_shape", "None"},
                              {"logical_axis_rules", "None"},  {"use_cpu_pjit", "False"},
                              {"mesh_invariant", "True"}};
  in_t5x.add("partitioning.PjitPartitioner", partitioner, "mesh + logical-axis partitioner");
  in_t5x.add("partitioning.ModelBasedPjitPartitioner", partitioner, "deprecated alias of PjitPartitioner");
  // t5x contrib/moe partitioning.py: the (data, expert, model) mesh and the
  // MoE logical-axis rules (trainer/run_config.h). Partial sums by default:
  // the experts' all-to-all spans 'expert', which the mesh-invariant mode's
  // per-replica programs cannot.
  Params moe_partitioner = partitioner;
  moe_partitioner.back() = {"mesh_invariant", "False"};
  moe_partitioner.push_back({"num_expert_partitions", ""});
  in_moe.add("partitioning.MoePjitPartitioner", moe_partitioner,
        "Mixture-of-Experts partitioner: mesh (data, expert, model), batch split over ('expert', 'data')");
  in_t5x.add("partitioning.standard_logical_axis_rules",
        {{"activation_partitioning_dims", "1"}, {"parameter_partitioning_dims", "1"},
         {"additional_rules", "None"}});

  in_t5x.add("trainer.Trainer",
        {{"num_microbatches", "None"}, {"learning_rate_fn", ""}, {"weight_metrics_computer", "None"}});
  in_moe.add("trainer.MoeTrainer",
        {{"num_microbatches", "None"}, {"learning_rate_fn", ""}, {"num_expert_partitions", ""},
         {"sharded_match_fn", "None"}, {"weight_metrics_computer", "None"}},
        "trainer.Trainer for MoE runs; num_expert_partitions must equal the MoePjitPartitioner's "
        "(t5x/contrib/moe/trainer.py)");
  in_t5x.add("trainer.WeightMetricsComputer", {});
  const Params action = {{"task", ""}, {"metric", "'loss'"}, {"mode", "'max'"},
                         {"patience", "3"}, {"atol", "0.0"}, {"rtol", "0.0"}};
  in_t5x.add("trainer.EarlyStoppingAction", action);
  in_t5x.add("trainer.TerminateOnNanAction", {{"task", ""}, {"metric", "'loss'"}});

  as_written.add("seqio.Evaluator",
        {{"logger_cls", "()"}, {"num_examples", "None"}, {"use_memory_cache", "True"},
         {"shuffle", "False"}, {"sequence_length", "None"}});
  // t5x's --seqio_additional_cache_dirs calls it; here also a gin list of
  // directories written by `seqio cache --output DIR`, read by every
  // DatasetConfig with use_cached = True.
  as_written.add("seqio.add_global_cache_dirs", {{"global_cache_dirs", "[]"}},
        "directories searched for seqio's offline task caches");
  // T5's span corruption mask (t5.data.preprocessors); read with every DatasetConfig.
  t5_data.add("preprocessors.random_spans_noise_mask", {{"random_roll", "False"}},
        "T5 span corruption: random_roll rotates each noise mask by a random offset");
  as_written.add("seqio.PyLoggingLogger", {});
  as_written.add("seqio.TensorBoardLogger", {});
  as_written.add("seqio.JSONLogger", {{"write_n_results", "None"}});

  in_t5x.add("gin_utils.summarize_gin_config", {{"model_dir", ""}, {"summary_writer", ""}, {"step", ""}});

  as_written.add("train_script.train",
        {{"model", ""}, {"train_dataset_cfg", ""}, {"train_eval_dataset_cfg", "None"},
         {"infer_eval_dataset_cfg", "None"}, {"checkpoint_cfg", ""}, {"partitioner", ""},
         {"trainer_cls", ""}, {"model_dir", ""}, {"total_steps", ""}, {"eval_steps", ""},
         {"eval_period", ""}, {"stats_period", "None"}, {"random_seed", "None"},
         {"use_hardware_rng", "False"}, {"summarize_config_fn", ""},
         {"inference_evaluator_cls", "None"}, {"get_dataset_fn", "None"},
         {"concurrent_metrics", "True"}, {"actions", "None"},
         {"train_eval_get_dataset_fn", "None"}, {"run_eval_before_training", "False"},
         {"relative_steps", "None"}, {"gc_period", "0"}, {"use_orbax", "True"}},
        "the train run mode (t5x/train.py)");
  as_written.add("eval_script.evaluate",
        {{"model", ""}, {"dataset_cfg", ""}, {"restore_checkpoint_cfg", ""}, {"partitioner", ""},
         {"output_dir", ""}, {"inference_evaluator_cls", ""}, {"summarize_config_fn", "None"},
         {"train_eval_dataset_cfg", "None"}, {"fallback_init_rng", "None"}, {"use_orbax", "True"}},
        "the eval run mode (t5x/eval.py)");
  as_written.add("infer_script.infer",
        {{"mode", ""}, {"model", ""}, {"dataset_cfg", ""}, {"restore_checkpoint_cfg", ""},
         {"partitioner", ""}, {"output_dir", ""}, {"checkpoint_period", ""}, {"shard_id", "0"},
         {"num_shards", "1"}, {"merge_chunked_results", "True"}, {"write_fn", "None"},
         {"checkpoint_ds_iter", "True"}, {"output_vocab_feature_name", "'targets'"},
         {"file_extension", "'jsonl'"}, {"keep_aux_as_numpy", "False"}, {"use_orbax", "True"}},
        "the infer run mode (t5x/infer.py)");
}

}  // namespace

void register_t5x_configurables(Registry& registry) {
  if (registry.contains("network.T5Config")) return;
  add_model_configurables(registry);
  add_optimizer_configurables(registry);
  add_run_configurables(registry);
}

}  // namespace t5x::gin
