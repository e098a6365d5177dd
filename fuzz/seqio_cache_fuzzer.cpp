// A task's offline cache as `seqio cache` writes it: the input is
// info.train.json, a NUL byte, stats.train.json, a NUL byte, and the bytes
// of shard train.tfrecord-00000-of-00001 (a missing part is an empty file).
// The directory gets its COMPLETED marker and is read as `--use-cached`
// reads it: open_cache_source, num_input_examples, then every record.
#include <filesystem>

#include "fuzz_util.h"
#include "seqio/cache.h"
#include "seqio/errors.h"
#include "seqio/sources.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const std::string dir = t5x_fuzz::scratch_dir() + "/cache";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string_view rest = t5x_fuzz::as_text(data, size);
  std::string_view part[3];
  for (auto& p : part) {
    const size_t nul = rest.find('\0');
    p = rest.substr(0, nul);
    rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  }
  t5x_fuzz::write_file(dir + "/info.train.json", part[0]);
  t5x_fuzz::write_file(dir + "/stats.train.json", part[1]);
  t5x_fuzz::write_file(dir + "/train.tfrecord-00000-of-00001", part[2]);
  t5x_fuzz::write_file(dir + "/COMPLETED", "");
  try {
    auto src = seqio::open_cache_source(dir);
    for (const auto& split : src->splits()) {
      (void)src->num_input_examples(split);
      for (size_t s = 0; s < src->list_shards(split).size(); ++s) {
        auto reader = src->open_shard(split, s);
        seqio::Example ex;
        while (reader->next(ex)) {
        }
      }
    }
  } catch (const seqio::DataError&) {
  }
  return 0;
}
