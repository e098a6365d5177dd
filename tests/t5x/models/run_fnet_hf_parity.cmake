# ctest driver of t5x_fnet_hf_parity: transformers writes a small random
# FNetModel and its outputs (fnet_hf_oracle.py), t5x.cpp loads the checkpoint
# and compares (fnet_hf_parity.cpp, tolerance 1e-4).
# Variables: PYTHON, SCRIPT, CHECK, OUT, SRC (the repository root).
include(${SRC}/tests/t5x/checkpoints/run_step.cmake)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
run("transformers FNetModel" ${PYTHON} ${SCRIPT} ${OUT})
run("t5x.cpp FNet" ${CHECK} ${OUT} 1e-4)
