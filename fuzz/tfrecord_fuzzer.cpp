// A TFRecord file of tf.train.Example read through seqio's
// TFExampleDataSource (framing, CRCs, the Example codec, feature conversion),
// once keeping every feature and once with a declared feature description.
#include "fuzz_util.h"
#include "seqio/errors.h"
#include "seqio/sources.h"

namespace {
void read_all(const seqio::DataSource& src) {
  try {
    auto reader = src.open_shard("train", 0);
    seqio::Example ex;
    while (reader->next(ex)) {
    }
  } catch (const seqio::DataError&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = t5x_fuzz::scratch_dir() + "/data.tfrecord";
  t5x_fuzz::write_file(path, t5x_fuzz::as_text(data, size));
  using seqio::DType;
  read_all(seqio::TFExampleDataSource({{"train", {path}}}));
  read_all(seqio::TFExampleDataSource(
      {{"train", {path}}},
      {{"inputs", DType::kInt32}, {"targets", DType::kString}, {"id", DType::kInt64}, {"score", DType::kFloat64}}));
  return 0;
}
