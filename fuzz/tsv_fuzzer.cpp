// A text file read through seqio's TsvDataSource (two columns, a header
// line) and TextLineDataSource (one example per line).
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
  const std::string path = t5x_fuzz::scratch_dir() + "/data.tsv";
  t5x_fuzz::write_file(path, t5x_fuzz::as_text(data, size));
  read_all(seqio::TsvDataSource({{"train", {path}}}, {"inputs", "targets"}, /*skip_header_lines=*/1));
  read_all(seqio::TextLineDataSource({{"train", {path}}}));
  return 0;
}
