// A JSON Lines file read through seqio's JsonlDataSource, once keeping every
// key and once with declared fields of each dtype.
#include "seqio_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = t5x_fuzz::source_file(data, size, "data.jsonl");
  using seqio::DType;
  t5x_fuzz::read_all(seqio::JsonlDataSource({{"train", {path}}}));
  t5x_fuzz::read_all(seqio::JsonlDataSource(
      {{"train", {path}}},
      {{"inputs", DType::kString}, {"targets", DType::kInt32}, {"id", DType::kInt64}, {"score", DType::kFloat64}}));
  return 0;
}
