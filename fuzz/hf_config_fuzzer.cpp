// A Hugging Face T5 config.json; what parses must survive to_json().
#include <cstdlib>

#include "fuzz_util.h"
#include "t5x/checkpoints/hf_t5.h"
#include "t5x/checkpoints/host_tensor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  t5x::HfT5Config c;
  try {
    c = t5x::HfT5Config::from_json(std::string(t5x_fuzz::as_text(data, size)), "config.json");
  } catch (const t5x::CheckpointError&) {
    return 0;
  }
  const auto again = t5x::HfT5Config::from_json(c.to_json(), "<to_json>");
  if (again.to_json() != c.to_json()) std::abort();
  return 0;
}
