// manifest.t5xcpp.json of a checkpoint directory, read as latest_valid_step
// and restore read it; what parses must survive to_json() unchanged.
#include <cstdlib>

#include "fuzz_util.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = t5x_fuzz::scratch_dir();
  t5x_fuzz::write_file(dir + "/" + t5x::kManifestFile, t5x_fuzz::as_text(data, size));
  std::optional<t5x::CheckpointManifest> m;
  try {
    m = t5x::read_manifest(dir);
  } catch (const t5x::CheckpointError&) {
    return 0;
  }
  if (!m) std::abort();
  const auto again = t5x::CheckpointManifest::from_json(m->to_json(), "<to_json>");
  if (again.files != m->files) std::abort();
  return 0;
}
