# ctest driver of the Python module's tests (python/CMakeLists.txt): runs
# SCRIPT with PYTHON, the module's build folder on PYTHONPATH and the seqio
# CLI (the C++ reference) in $SEQIO_BIN. Variables: PYTHON, SCRIPT, PYTHONPATH,
# SEQIO_BIN, PLUGIN (load_module's test plugin).
set(ENV{PYTHONPATH} ${PYTHONPATH})
set(ENV{SEQIO_BIN} ${SEQIO_BIN})
set(ENV{PLUGIN} ${PLUGIN})
execute_process(COMMAND ${PYTHON} ${SCRIPT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SCRIPT} failed (${rc})")
endif()
