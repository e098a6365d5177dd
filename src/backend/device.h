// Backend-neutral facts about the devices of this build (no backend header).
//
// The CUDA backend is optional: a build without it links src/backend/no_cuda/
// (stubs with the same entry points), so every configuration links and
// src/backend/cuda/<family>.cu can follow with the CPU's file names.
#pragma once

namespace t5x::backend {

// True when this build has a CUDA backend and a CUDA device is present;
// false in a build that links no_cuda.
bool cuda_available();

}  // namespace t5x::backend
