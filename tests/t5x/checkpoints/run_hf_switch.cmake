# ctest driver of t5x_ckpt_hf_switch: Switch Transformers logits parity with
# transformers, both ways.
#  import: tiny random SwitchTransformersForConditionalGeneration models made
#    by transformers (make_tiny_switch.py) -> `t5x ckpt import-hf` -> t5x.cpp's
#    logits with the written model.gin (t5x_ckpt_hf_logits) vs transformers'.
#    switch4: 4 experts, 4 layers, sparse 1 and 3 (MIXED), untied, relu;
#    switch8: 8 experts, 3 layers, sparse 1 (MIDDLE), tied, gelu_new.
#  export: a tiny 4-expert MoE T5 (relu, 4 layers, every other layer sparse)
#    trained 2 steps with `t5x train` -> `t5x ckpt export-hf` -> same check.
#  Every sequence (7 / 5 tokens) fits both capacities (transformers'
#  expert_capacity 64; t5x's groups of <= 4 tokens with min_expert_capacity 4),
#  so no token is dropped in either model.
#  error: a placement t5x can't express (4 layers, 1 sparse: transformers'
#    layer 1) is refused naming config.json.
# Variables: T5X, LOGITS, PYTHON, SCRIPT, MAKE, OUT, SRC (the repository root).
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(pairs)
foreach(spec "switch4;4;4;2;relu;untied;1" "switch8;8;3;1;gelu_new;tie;2")
  list(GET spec 0 name)
  list(SUBLIST spec 1 -1 margs)
  set(dir ${OUT}/${name})
  run("make ${name}" ${PYTHON} ${MAKE} ${dir}/hf ${margs})
  run("import-hf ${name}" ${T5X} ckpt import-hf ${dir}/hf ${dir}/model)
  run("logits ${name}" ${LOGITS} --gin_file=${dir}/model/model.gin --gin_search_paths=configs/models
      --gin.DROPOUT_RATE=0.0 ${dir}/model/checkpoint_0 ${dir}/logits.safetensors)
  list(APPEND pairs ${dir}/hf ${dir}/logits.safetensors)
endforeach()

set(dir ${OUT}/export)
run("train moe" ${T5X} train --gin_file=configs/models/moe/tiny.gin --gin_file=configs/runs/pretrain.gin
    "--gin_bindings=MODEL_DIR = '${dir}/model'" ${tiny_train_flags}
    "--gin_bindings=network.T5Config.mlp_activations = ('relu',)"
    "--gin_bindings=network.T5Config.num_encoder_layers = 4" "--gin_bindings=network.T5Config.num_decoder_layers = 4"
    "--gin_bindings=NUM_ENCODER_SPARSE_LAYERS = 2" "--gin_bindings=NUM_DECODER_SPARSE_LAYERS = 2"
    # Unfactored Adafactor: expert kernels need no factor rules (moe.md 2.3).
    "--gin_bindings=adafactor.Adafactor.factored = False")
run("export-hf moe" ${T5X} ckpt export-hf ${dir}/model ${dir}/hf)
run("logits moe" ${LOGITS} --gin_file=${dir}/model/config.gin ${dir}/model/checkpoint_2 ${dir}/logits.safetensors)
list(APPEND pairs ${dir}/hf ${dir}/logits.safetensors)

# One interpreter for all models: importing torch dominates the time.
run("transformers" ${PYTHON} ${SCRIPT} --tolerance=1e-4 ${pairs})

# transformers' layer 1 of 4 as the only sparse layer: no t5x layout gives it.
set(dir ${OUT}/step4)
run("make step4" ${PYTHON} ${MAKE} ${dir}/hf 4 4 1 relu untied 3)
execute_process(COMMAND ${T5X} ckpt import-hf ${dir}/hf ${dir}/model RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(rc EQUAL 0 OR NOT err MATCHES "config.json: transformers makes encoder layers \\{1\\} of 4 sparse")
  message(FATAL_ERROR "import-hf of an inexpressible placement: rc ${rc}, expected a clear error; got:\n${out}${err}")
endif()
if(EXISTS ${dir}/model/checkpoint_0)
  message(FATAL_ERROR "import-hf wrote ${dir}/model/checkpoint_0 before refusing the placement")
endif()
message(STATUS "step4 refused: ${err}")
