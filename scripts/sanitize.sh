#!/usr/bin/env bash
# The test suite's parsers and data layer under AddressSanitizer (with
# LeakSanitizer) and UndefinedBehaviorSanitizer: builds into build-asan/
# (GCC, -DT5X_ASAN=ON -DT5X_UBSAN=ON) and runs those tests with ctest; any
# report fails the run (UBSan does not recover; ASan aborts on the first error).
#
# The subset, SANITIZE_TESTS (override it to run others): every test binary
# of core, gin, checkpoints, TensorBundle, seqio (sources, vocabularies,
# pipeline, cache, mixtures, batching, evaluation, preprocessors, feature
# converters, metrics, task files) and summaries: the code that reads and writes outside
# bytes, about 116 of the 264 C++ files. The model, backend, ops, SPMD and
# trainer tests (but t5x_run_state_test: the trainer's state files, no model
# code) are left out to keep CI's 2 cores within the time limit:
# theirs are the slowest files to compile (the SIMD kernels are built for
# every x86 target) and the heaviest tests to run instrumented; the CLI tests
# need those programs.
#
# No suppressions are used. Should one become necessary (for libgomp or
# oneDNN, say), it goes in a file under scripts/sanitizers/ with its reason,
# and never for our code.
set -euo pipefail
cd "$(dirname "$0")/.."
SANITIZE_TESTS=${SANITIZE_TESTS:-"core_test core_random_test t5x_gin_test t5x_checkpoints_test
  t5x_tf_bundle_test t5x_tf_bundle_errors_test seqio_vocab_test seqio_sources_test seqio_pipeline_test
  seqio_mixture_test seqio_cache_test seqio_evaluation_test seqio_registration_test seqio_batching_test
  seqio_preprocessors_test seqio_feature_converters_test seqio_metrics_test seqio_task_file_test t5x_summaries_test
  t5x_run_state_test"}
scripts/deps.sh
BUILD_DIR=build-asan TARGETS="$SANITIZE_TESTS" scripts/build.sh \
  -DT5X_ASAN=ON -DT5X_UBSAN=ON -DT5X_BUILD_BENCH=OFF "$@"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
labels=$(echo $SANITIZE_TESTS | sed 's/ /|/g')
cd build-asan
ctest --output-on-failure -j "${CTEST_JOBS:-2}" -L "^($labels)\$"
