# ctest driver of t5x_ckpt_hf_roundtrip: for a tiny T5.1.1 and a tiny T5.1.0,
# train two steps with `t5x train`, `t5x ckpt export-hf`, write t5x.cpp's logits
# (t5x_ckpt_hf_logits) and compare them with transformers' (hf_roundtrip_check.py).
# Variables: T5X, LOGITS, PYTHON, SCRIPT, OUT, SRC (the repository root).
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

set(common ${tiny_train_flags}
  "--gin_bindings=network.T5Config.emb_dim = 32" "--gin_bindings=network.T5Config.num_heads = 4"
  "--gin_bindings=network.T5Config.num_encoder_layers = 2" "--gin_bindings=network.T5Config.num_decoder_layers = 2"
  "--gin_bindings=network.T5Config.head_dim = 8" "--gin_bindings=network.T5Config.mlp_dim = 48")
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
