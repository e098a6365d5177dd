// The msgpack `checkpoint` file of a t5x checkpoint, decoded as restore does.
#include <span>

#include "fuzz_util.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/msgpack_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)t5x::decode_checkpoint_msgpack(std::span<const uint8_t>(data, size), "checkpoint_1/checkpoint");
  } catch (const t5x::CheckpointError&) {
  }
  return 0;
}
