// A TFRecord file of tf.train.Example read through seqio's
// TFExampleDataSource (framing, CRCs, the Example codec, feature conversion),
// once keeping every feature and once with a declared feature description.
#include "seqio_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = t5x_fuzz::source_file(data, size, "data.tfrecord");
  using seqio::DType;
  t5x_fuzz::read_all(seqio::TFExampleDataSource({{"train", {path}}}));
  t5x_fuzz::read_all(seqio::TFExampleDataSource(
      {{"train", {path}}},
      {{"inputs", DType::kInt32}, {"targets", DType::kString}, {"id", DType::kInt64}, {"score", DType::kFloat64}}));
  return 0;
}
