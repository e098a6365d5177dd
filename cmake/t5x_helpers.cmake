# t5x_add_test(NAME name SOURCES a.cpp ... LIBS lib ... [LABELS l ...])
# One gtest binary per test file family; cases are registered with ctest
# through gtest_discover_tests so that each TEST shows up by name.
function(t5x_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${T_NAME} PRIVATE
    T5X_SOURCE_DIR="${CMAKE_SOURCE_DIR}" T5X_BINARY_DIR="${CMAKE_BINARY_DIR}")
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  gtest_discover_tests(${T_NAME}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
    DISCOVERY_TIMEOUT 60)
endfunction()

# t5x_add_python_check(NAME test IMPORTS "import a, b" WRITER exe WRITER_SOURCES a.cpp
#                      LIBS lib SCRIPT scripts/check/x.py RUNNER run_x.cmake OUT subdir)
# A C++ writer makes files that a Python script from PyPI packages reads back.
# Registered only when the imports work at configure time, so machines
# without those packages still pass.
function(t5x_add_python_check)
  cmake_parse_arguments(P "" "NAME;IMPORTS;WRITER;SCRIPT;RUNNER;OUT" "WRITER_SOURCES;LIBS" ${ARGN})
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(NOT Python3_Interpreter_FOUND)
    return()
  endif()
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "${P_IMPORTS}"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(STATUS "${P_NAME}: skipped (${P_IMPORTS} fails)")
    return()
  endif()
  add_executable(${P_WRITER} ${P_WRITER_SOURCES})
  target_link_libraries(${P_WRITER} PRIVATE ${P_LIBS})
  add_test(NAME ${P_NAME}
           COMMAND ${CMAKE_COMMAND}
             -DWRITER=$<TARGET_FILE:${P_WRITER}>
             -DPYTHON=${Python3_EXECUTABLE}
             -DSCRIPT=${CMAKE_SOURCE_DIR}/${P_SCRIPT}
             -DOUT=${CMAKE_CURRENT_BINARY_DIR}/${P_OUT}
             -P ${CMAKE_CURRENT_SOURCE_DIR}/${P_RUNNER})
  set_tests_properties(${P_NAME} PROPERTIES TIMEOUT 300)
endfunction()
