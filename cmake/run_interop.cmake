# ctest driver of the interop checks (t5x_add_interop_test): checks that the
# Python packages import, then runs the check's own driver (RUNNER).
# Variables: PYTHON, IMPORTS, RUNNER, and the driver's own.
if(NOT PYTHON)
  message(FATAL_ERROR "no python3 for the interop checks: install python3 (scripts/deps.sh) "
                      "and run scripts/test.sh, which makes their venv (scripts/python_env.sh)")
endif()
execute_process(COMMAND ${PYTHON} -c "${IMPORTS}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PYTHON} cannot '${IMPORTS}':\n${err}\nThe interop checks need the "
                      "pinned PyPI packages of scripts/python-requirements.txt: run scripts/test.sh "
                      "(it configures -DT5X_PYTHON=$(scripts/python_env.sh)).")
endif()
include(${RUNNER})
