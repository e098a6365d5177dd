# run(WHAT COMMAND...): one step of a ctest driver (cmake -P), run in ${SRC};
# prints its output and fails the test, naming the step, when it fails.
function(run what)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${SRC} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  message(STATUS "${what}: ${o}${e}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
endfunction()
