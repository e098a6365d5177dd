# t5x_add_test(NAME name SOURCES a.cpp ... LIBS lib ... [LABELS l ...])
# One gtest binary per test file family; cases are registered with ctest
# through gtest_discover_tests so that each TEST shows up by name, labelled
# with the binary's name too (ctest -L selects a binary's tests:
# scripts/sanitize.sh). NO_PRETTY_VALUES: a parameterised case is named by
# its suite's name generator alone, not by gtest's print of the parameter
# (raw bytes for a struct: padding and pointers, different in every build).
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
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_NAME};${T_LABELS}"
    DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES)
endfunction()

# The interpreter of the interop checks: scripts/test.sh passes the venv that
# scripts/python_env.sh makes (pinned PyPI versions). Empty: python3 on PATH.
set(T5X_PYTHON "" CACHE FILEPATH "Python of the interop checks (scripts/python_env.sh prints one)")
if(T5X_PYTHON)
  set(T5X_PYTHON_EXE ${T5X_PYTHON})
else()
  find_program(T5X_PYTHON_EXE python3)
endif()

# t5x_add_interop_test(NAME test IMPORTS "import a, b" RUNNER run_x.cmake ARGS -DK=V ...)
# A ctest test that runs RUNNER (cmake -P) with PYTHON set, after checking
# that IMPORTS work. Always registered: where the packages are missing the
# test fails and says how to get them (a check that skips is not a check).
function(t5x_add_interop_test)
  cmake_parse_arguments(P "" "NAME;IMPORTS;RUNNER;TIMEOUT" "ARGS" ${ARGN})
  if(NOT P_TIMEOUT)
    set(P_TIMEOUT 300)
  endif()
  add_test(NAME ${P_NAME}
           COMMAND ${CMAKE_COMMAND}
             -DPYTHON=${T5X_PYTHON_EXE} "-DIMPORTS=${P_IMPORTS}"
             -DRUNNER=${P_RUNNER} ${P_ARGS}
             -P ${CMAKE_SOURCE_DIR}/cmake/run_interop.cmake)
  set_tests_properties(${P_NAME} PROPERTIES TIMEOUT ${P_TIMEOUT} LABELS "interop")
endfunction()

# t5x_add_python_check(NAME test IMPORTS "import a, b" WRITER exe WRITER_SOURCES a.cpp
#                      LIBS lib SCRIPT scripts/check/x.py RUNNER run_x.cmake OUT subdir)
# A C++ writer makes files that a Python script from PyPI packages reads back.
function(t5x_add_python_check)
  cmake_parse_arguments(P "" "NAME;IMPORTS;WRITER;SCRIPT;RUNNER;OUT" "WRITER_SOURCES;LIBS" ${ARGN})
  add_executable(${P_WRITER} ${P_WRITER_SOURCES})
  target_link_libraries(${P_WRITER} PRIVATE ${P_LIBS})
  t5x_add_interop_test(NAME ${P_NAME} IMPORTS "${P_IMPORTS}"
    RUNNER ${CMAKE_CURRENT_SOURCE_DIR}/${P_RUNNER}
    ARGS -DWRITER=$<TARGET_FILE:${P_WRITER}> -DSCRIPT=${CMAKE_SOURCE_DIR}/${P_SCRIPT}
         -DOUT=${CMAKE_CURRENT_BINARY_DIR}/${P_OUT})
endfunction()

# t5x_add_mpi_test(NAME name SOURCES a.cpp ... LIBS lib ... NPROCS 2 4 ...)
# One gtest binary (its own main(), e.g. tests/common/mpi_gtest_main.h) run by
# mpiexec once per process count as ctest test <name>_np<n> (label
# distributed; oversubscribed, as root, one thread per process). Only where
# the MPI backend and mpiexec are found.
function(t5x_add_mpi_test)
  cmake_parse_arguments(M "" "NAME;TIMEOUT" "SOURCES;LIBS;NPROCS" ${ARGN})
  if(NOT (T5X_HAVE_MPI AND MPIEXEC_EXECUTABLE))
    return()
  endif()
  if(NOT M_TIMEOUT)
    set(M_TIMEOUT 120)
  endif()
  add_executable(${M_NAME} ${M_SOURCES})
  target_link_libraries(${M_NAME} PRIVATE ${M_LIBS} GTest::gtest)
  set_target_properties(${M_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  foreach(np ${M_NPROCS})
    add_test(NAME ${M_NAME}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none --mca btl self,vader -np ${np}
                     $<TARGET_FILE:${M_NAME}>
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${M_NAME}_np${np} PROPERTIES TIMEOUT ${M_TIMEOUT} LABELS "distributed" PROCESSORS 2
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_mpi_yield_when_idle=1;OMP_NUM_THREADS=1")
  endforeach()
endfunction()

# t5x_export_seqio(program): a program that dlopen()s --module plugins. A
# plugin links no seqio library (t5xcpp::plugin); its seqio symbols resolve to
# the program's, so that plugin and program share one TaskRegistry. The
# program therefore exports its symbols and links every seqio library whole:
# any public seqio function is there for a plugin, used by the program or not.
# (--whole-archive as a link option, ahead of the libraries: CMake repeats
# static libraries on the link line, and LINK_LIBRARY_OVERRIDE's WHOLE_ARCHIVE
# would then define each member twice.)
function(t5x_export_seqio program)
  set_property(TARGET ${program} PROPERTY ENABLE_EXPORTS ON)
  set(whole "")
  foreach(lib seqio_core seqio_preprocessors seqio_feature_converters seqio_metrics)
    if(TARGET ${lib})
      target_link_libraries(${program} PRIVATE ${lib})
      list(APPEND whole "$<TARGET_FILE:${lib}>")
    endif()
  endforeach()
  target_link_options(${program} PRIVATE "LINKER:--whole-archive" ${whole} "LINKER:--no-whole-archive")
  install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()

# t5x_link_jemalloc(target): the programs that run models (t5x, seqio, the
# model benchmark) allocate through jemalloc (libjemalloc-dev) instead of
# glibc's malloc. An eager step makes a few hundred small allocations per
# token (shapes, arrays, op records); glibc's free and consolidation of them
# cost 6-9 ms per batch-1 greedy decode of T5.1.1 small (251-255 -> 242-245
# ms, AVX2, docs/performance.md, session 59); training steps and batch-8
# decodes are level. Large buffers come from core/allocator.h's cache either way. Not with
# the sanitizers, which bring their own malloc. Linked --no-as-needed: the program
# must load it even where it calls no jemalloc symbol by name (the malloc
# calls are resolved to it by interposition).
set(T5X_JEMALLOC "")
if(NOT T5X_ASAN AND NOT T5X_FUZZ)
  find_library(T5X_JEMALLOC_LIBRARY NAMES jemalloc)
  if(NOT T5X_JEMALLOC_LIBRARY)
    message(FATAL_ERROR "jemalloc not found: install libjemalloc-dev (scripts/deps.sh does)")
  endif()
  set(T5X_JEMALLOC ${T5X_JEMALLOC_LIBRARY})
endif()
function(t5x_link_jemalloc target)
  if(T5X_JEMALLOC)
    target_link_libraries(${target} PRIVATE -Wl,--push-state,--no-as-needed ${T5X_JEMALLOC} -Wl,--pop-state)
  endif()
endfunction()
