# ctest driver of t5x_ckpt_tf_hf_roundtrip: the committed TensorFlow-written
# Mesh-TF checkpoint (tests/data/tf_mtf_tiny/model.ckpt-2) through
# `t5x ckpt import-tf` then `export-hf`; t5x.cpp's logits of the imported
# checkpoint (t5x_ckpt_hf_logits, model.gin written by import-tf) against
# transformers' on the export (hf_roundtrip_check.py).
# Variables: T5X, LOGITS, PYTHON, SCRIPT, OUT, SRC (the repository root).
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
run("import-tf" ${T5X} ckpt import-tf ${SRC}/tests/data/tf_mtf_tiny/model.ckpt-2 ${OUT}/model)
run("export-hf" ${T5X} ckpt export-hf ${OUT}/model ${OUT}/hf)
run("logits" ${LOGITS} --gin_file=${OUT}/model/model.gin --gin_search_paths=configs/models --gin.DROPOUT_RATE=0.0
    ${OUT}/model/checkpoint_2 ${OUT}/logits.safetensors)
run("transformers" ${PYTHON} ${SCRIPT} --tolerance=1e-4 ${OUT}/hf ${OUT}/logits.safetensors)
