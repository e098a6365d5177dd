# ctest driver: write a checkpoint with t5x.cpp, then read it with Python.
execute_process(COMMAND ${WRITER} ${OUT}/model ${OUT}/expected.json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writer failed: ${rc}")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${OUT}/model/checkpoint_42 ${OUT}/expected.json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ckpt_python_reads.py failed: ${rc}")
endif()
