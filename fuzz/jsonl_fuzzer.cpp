// A JSON Lines file read through seqio's JsonlDataSource, once keeping every
// key and once with declared fields of each dtype.
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
  const std::string path = t5x_fuzz::scratch_dir() + "/data.jsonl";
  t5x_fuzz::write_file(path, t5x_fuzz::as_text(data, size));
  using seqio::DType;
  read_all(seqio::JsonlDataSource({{"train", {path}}}));
  read_all(seqio::JsonlDataSource(
      {{"train", {path}}},
      {{"inputs", DType::kString}, {"targets", DType::kInt32}, {"id", DType::kInt64}, {"score", DType::kFloat64}}));
  return 0;
}
