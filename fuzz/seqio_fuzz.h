// Shared by the harnesses of seqio's file sources: the input becomes the
// source's one file, and every record of it is read.
#pragma once
#include "fuzz_util.h"
#include "seqio/errors.h"
#include "seqio/sources.h"

namespace t5x_fuzz {

// Writes the input to <scratch>/<name> and returns the path.
inline std::string source_file(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = scratch_dir() + "/" + name;
  write_file(path, as_text(data, size));
  return path;
}

// Reads split "train" to the end; DataError (the documented error) ends it.
inline void read_all(const seqio::DataSource& src) {
  try {
    auto reader = src.open_shard("train", 0);
    seqio::Example ex;
    while (reader->next(ex)) {
    }
  } catch (const seqio::DataError&) {
  }
}

}  // namespace t5x_fuzz
