// A zarr array directory: the input is the `.zarray` text, a newline, then
// the bytes of chunk 0 (0.0...). The metadata is parsed as the reader does;
// small arrays (at most 1 MiB and 4096 chunks, the others missing) are then
// read whole through zarr_read, which decodes the chunk.
#include <filesystem>

#include "fuzz_util.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/zarr.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = t5x_fuzz::as_text(data, size);
  const size_t nl = in.find('\n');
  const std::string_view zarray = in.substr(0, nl);
  const std::string_view chunk = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  const std::string dir = t5x_fuzz::scratch_dir() + "/array";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  t5x_fuzz::write_file(dir + "/.zarray", zarray);
  try {
    const t5x::ZarrMetadata meta = t5x::zarr_read_metadata(dir);
    // from_json bounds every product by 2^63 bytes; these keep a run small.
    uint64_t grid = 1;
    for (int64_t g : meta.grid_shape())
      if (__builtin_mul_overflow(grid, uint64_t(g), &grid)) return 0;
    const auto bytes = t5x::checked_nbytes(meta.shape, meta.itemsize());
    if (!bytes || *bytes > (1u << 20) || meta.chunk_nbytes() > (1u << 20) || grid > 4096) return 0;
    const std::filesystem::path chunk_file =
        dir + "/" + meta.chunk_key(std::vector<int64_t>(meta.shape.size(), 0));
    std::filesystem::create_directories(chunk_file.parent_path());  // "/" separator: 0/0
    t5x_fuzz::write_file(chunk_file, chunk);
    (void)t5x::zarr_read(dir);
  } catch (const t5x::CheckpointError&) {
  }
  return 0;
}
