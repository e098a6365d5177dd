// A model directory's model-info.txt (written by write_model_info, and by
// t5x), read as `t5x ckpt info` reads it for logical axis names.
#include "fuzz_util.h"
#include "t5x/checkpoints/inspect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = t5x_fuzz::scratch_dir() + "/model-info.txt";
  t5x_fuzz::write_file(path, t5x_fuzz::as_text(data, size));
  (void)t5x::read_model_info_axes(path);  // documented: never throws
  return 0;
}
