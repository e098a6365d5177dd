# cmake -DMPIEXEC=.. -DNP=.. -DEXE=.. -DCASE=.. -DEXPECT=.. -P expect_all_ranks_fail.cmake
# Runs a misconfigured job and passes only if it exits non-zero and EVERY rank
# printed "rank r/NP: error: ...<EXPECT>...".
separate_arguments(flags UNIX_COMMAND "${MPIEXEC_FLAGS}")
execute_process(
  COMMAND ${MPIEXEC} ${flags} -np ${NP} ${EXE} ${CASE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
set(all "${out}${err}")
string(REPLACE ";" "," all "${all}")  # keep CMake lists intact
message("${all}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the misconfigured job '${CASE}' exited 0")
endif()
math(EXPR last "${NP} - 1")
foreach(r RANGE 0 ${last})
  string(FIND "${all}" "rank ${r}/${NP}: error: " pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "rank ${r} of ${NP} did not report the error (rc=${rc})")
  endif()
endforeach()
string(REGEX MATCHALL "rank [0-9]+/${NP}: error: [^\n]*" lines "${all}")
foreach(line IN LISTS lines)
  string(FIND "${line}" "${EXPECT}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "error line lacks '${EXPECT}': ${line}")
  endif()
endforeach()
message("OK: all ${NP} ranks reported '${EXPECT}' and the job exited ${rc}")
