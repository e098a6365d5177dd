// The CUDA backend's entry points in a build without CUDA (see
// backend/device.h): nothing runs on a CUDA device. Primitives need no stub
// each: Primitive::eval_cuda() throws "[op] has no CUDA kernel in this build".
#include "backend/device.h"

namespace t5x::backend {

bool cuda_available() { return false; }

}  // namespace t5x::backend
