# ctest driver: write one train state in scalable_t5's scanned layout and
# per layer with t5x.cpp, then compare the two with Python.
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${WRITER} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writer failed: ${rc}")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${OUT}/scanned/checkpoint_3 ${OUT}/per_layer/checkpoint_3
                        ${OUT}/hf_scanned ${OUT}/hf_per_layer RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ckpt_scalable_layout.py failed: ${rc}")
endif()
