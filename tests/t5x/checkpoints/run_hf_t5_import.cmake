# ctest driver of t5x_ckpt_hf_t5_import: `t5x ckpt import-hf` of tiny T5 models
# made by the installed transformers (make_tiny_t5.py: the logits forms of
# transformers 5 and 4 files; mT5; umT5, also exported back) -> t5x.cpp's logits with the written model.gin
# (t5x_ckpt_hf_logits) vs transformers' from_pretrained, within 1e-4.
# Variables: T5X, LOGITS, PYTHON, SCRIPT, MAKE, OUT, SRC (the repository root).
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(pairs)
foreach(form v5_t511 v5_t510 v4_t511 v4_t511_f64 v5_mt5 v5_umt5 v4_umt5)
  set(dir ${OUT}/${form})
  run("make ${form}" ${PYTHON} ${MAKE} ${dir}/hf ${form})
  run("import-hf ${form}" ${T5X} ckpt import-hf ${dir}/hf ${dir}/model)
  run("logits ${form}" ${LOGITS} --gin_file=${dir}/model/model.gin --gin_search_paths=configs/models
      --gin.DROPOUT_RATE=0.0 ${dir}/model/checkpoint_0 ${dir}/logits.safetensors)
  list(APPEND pairs ${dir}/hf ${dir}/logits.safetensors)
endforeach()
# umT5 back out: export-hf of the imported checkpoint (checked against its
# model.gin) is a UMT5ForConditionalGeneration with the same logits.
foreach(form v5_umt5 v4_umt5)
  set(dir ${OUT}/${form})
  run("export-hf ${form}" ${T5X} ckpt export-hf ${dir}/model/checkpoint_0 ${dir}/exported
      --gin_file=${dir}/model/model.gin --gin_search_paths=configs/models --gin.DROPOUT_RATE=0.0)
  file(READ ${dir}/exported/config.json exported)
  if(NOT exported MATCHES "\"model_type\": \"umt5\"")
    message(FATAL_ERROR "${form}: export-hf wrote no umt5 config:\n${exported}")
  endif()
  list(APPEND pairs ${dir}/exported ${dir}/logits.safetensors)
endforeach()
file(READ ${OUT}/v5_umt5/model/model.gin gin)
if(NOT gin MATCHES "relpos_per_layer = True")
  message(FATAL_ERROR "v5_umt5 imported without relpos_per_layer:\n${gin}")
endif()
# t5x scales only logits through the embedding; unscaled shared logits are a kernel.
file(READ ${OUT}/v5_t511/model/model.gin gin)
if(NOT gin MATCHES "logits_via_embedding = False")
  message(FATAL_ERROR "v5_t511 (scale_decoder_outputs false) imported with tied, scaled logits:\n${gin}")
endif()
run("transformers" ${PYTHON} ${SCRIPT} --tolerance=1e-4 ${pairs})
