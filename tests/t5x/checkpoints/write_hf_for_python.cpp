// Writes a tiny T5.1.1 t5x checkpoint, exports it with export_hf_t5, and
// records the expected HF tensors for scripts/check/hf_safetensors_reads.py:
//   t5x_write_hf_for_python OUT_DIR      -> OUT_DIR/hf/{model.safetensors,config.json},
//                                           OUT_DIR/hf_expected.json
#include <cstdio>
#include <nlohmann/json.hpp>

#include "t5_test_shapes.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/hf_convert.h"

using namespace t5x;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  fileio::remove_all(out);
  auto params = testing_util::random_params(testing_util::t5_param_shapes(40, 8, 4, 3, 16, 2, 2, true, false));
  std::vector<SaveLeaf> leaves;
  for (const auto& [n, t] : params)
    leaves.push_back(SaveLeaf::sharded("target/" + n, t, t.shape, IndexBox::full(t.shape)));
  leaves.push_back(SaveLeaf::inline_array("state/step", HostTensor::from_values<int32_t>("int32", {}, {1})));
  save_checkpoint(out + "/model", 1, leaves);
  export_hf_t5(out + "/model/checkpoint_1", out + "/hf", "bfloat16");
  nlohmann::json exp;
  for (const auto& [hf_name, t] : t5x_params_to_hf(params)) {
    HostTensor b = cast_host_tensor(cast_host_tensor(t, "bfloat16"), "float32");
    exp[hf_name] = {{"shape", t.shape}, {"values", b.values<float>()}};
  }
  fileio::write_text(out + "/hf_expected.json", exp.dump(), false);
  return 0;
}
