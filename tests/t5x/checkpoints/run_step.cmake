# run(WHAT COMMAND...): one step of a ctest driver (cmake -P), run in ${SRC};
# prints its output and fails the test, naming the step, when it fails.
function(run what)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${SRC} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  message(STATUS "${what}: ${o}${e}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
endfunction()

# The gin bindings of a 2-step `t5x train` of a tiny model on gpl3_lines_copy
# (vocab 1152, float32 activations, a checkpoint at step 2, constant LR 0.05),
# shared by the export-hf drivers.
set(tiny_train_flags
  "--gin_bindings=MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'"
  "--gin_bindings=TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}"
  "--gin_bindings=TRAIN_STEPS = 2" "--gin_bindings=BATCH_SIZE = 4"
  "--gin_bindings=USE_CACHED_TASKS = False" "--gin_bindings=RANDOM_SEED = 5"
  "--gin_bindings=ACTIVATION_DTYPE = 'float32'"
  "--gin_bindings=network.T5Config.vocab_size = 1152"
  "--gin_bindings=utils.SaveCheckpointConfig.period = 2"
  "--gin_bindings=utils.create_learning_rate_scheduler.factors = 'constant'"
  "--gin_bindings=utils.create_learning_rate_scheduler.base_learning_rate = 0.05")
