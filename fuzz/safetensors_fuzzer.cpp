// A safetensors file (8-byte header length, JSON header, tensor bytes) as
// `t5x ckpt` and the HF converters read it.
#include <span>

#include "fuzz_util.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)t5x::decode_safetensors(std::span<const uint8_t>(data, size), "model.safetensors");
  } catch (const t5x::CheckpointError&) {
  }
  return 0;
}
