// A text file read through seqio's TsvDataSource (two columns, a header
// line) and TextLineDataSource (one example per line).
#include "seqio_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = t5x_fuzz::source_file(data, size, "data.tsv");
  t5x_fuzz::read_all(seqio::TsvDataSource({{"train", {path}}}, {"inputs", "targets"}, /*skip_header_lines=*/1));
  t5x_fuzz::read_all(seqio::TextLineDataSource({{"train", {path}}}));
  return 0;
}
