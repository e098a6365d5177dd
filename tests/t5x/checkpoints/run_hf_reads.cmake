# ctest driver: export a tiny T5 to Hugging Face format, read it with safetensors.
execute_process(COMMAND ${WRITER} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writer failed: ${rc}")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${OUT}/hf ${OUT}/hf_expected.json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hf_safetensors_reads.py failed: ${rc}")
endif()
