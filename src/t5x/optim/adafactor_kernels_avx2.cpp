// The Adafactor kernels compiled for AVX2 (CMake gives this file -mavx2):
// the 8-lane vectors of adafactor_kernels.cpp become single ymm registers.
// adafactor_dispatch.cpp calls them where the CPU has AVX2.
#define T5X_ADAFACTOR_ISA avx2
#include "t5x/optim/adafactor_kernels.cpp"  // NOLINT: one source, two targets
