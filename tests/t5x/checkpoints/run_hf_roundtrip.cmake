# ctest driver of t5x_ckpt_hf_roundtrip: for a tiny T5.1.1 and a tiny T5.1.0,
# train two steps with `t5x train`, `t5x ckpt export-hf`, write t5x.cpp's logits
# (t5x_ckpt_hf_logits) and compare them with transformers' (hf_roundtrip_check.py).
# Variables: T5X, LOGITS, PYTHON, SCRIPT, OUT, SRC (the repository root).
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

set(common
  "--gin_bindings=MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'"
  "--gin_bindings=TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}"
  "--gin_bindings=TRAIN_STEPS = 2" "--gin_bindings=BATCH_SIZE = 4"
  "--gin_bindings=USE_CACHED_TASKS = False" "--gin_bindings=RANDOM_SEED = 5"
  "--gin_bindings=ACTIVATION_DTYPE = 'float32'"
  "--gin_bindings=network.T5Config.vocab_size = 1152"
  "--gin_bindings=network.T5Config.emb_dim = 32" "--gin_bindings=network.T5Config.num_heads = 4"
  "--gin_bindings=network.T5Config.num_encoder_layers = 2" "--gin_bindings=network.T5Config.num_decoder_layers = 2"
  "--gin_bindings=network.T5Config.head_dim = 8" "--gin_bindings=network.T5Config.mlp_dim = 48"
  "--gin_bindings=utils.SaveCheckpointConfig.period = 2"
  "--gin_bindings=utils.create_learning_rate_scheduler.factors = 'constant'"
  "--gin_bindings=utils.create_learning_rate_scheduler.base_learning_rate = 0.05")
set(pairs)
foreach(v t5_1_1/tiny t5_1_0/small)
  string(REPLACE "/" "_" name ${v})
  set(dir ${OUT}/${name})
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  run("train ${v}" ${T5X} train --gin_file=configs/models/${v}.gin --gin_file=configs/runs/pretrain.gin
      "--gin_bindings=MODEL_DIR = '${dir}/model'" ${common})
  run("export-hf ${v}" ${T5X} ckpt export-hf ${dir}/model ${dir}/hf)
  run("logits ${v}" ${LOGITS} --gin_file=${dir}/model/config.gin ${dir}/model/checkpoint_2 ${dir}/logits.safetensors)
  list(APPEND pairs ${dir}/hf ${dir}/logits.safetensors)
endforeach()
# One interpreter for both models: importing torch dominates the time.
run("transformers" ${PYTHON} ${SCRIPT} --tolerance=1e-4 ${pairs})
