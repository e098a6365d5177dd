// The .index file of a TensorFlow TensorBundle checkpoint (a LevelDB table of
// hand-decoded BundleEntryProtos) opened as `t5x ckpt` / the Mesh TF importer
// open it; every listed tensor is then verified (its data file is absent, so
// each must fail with a CheckpointError rather than crash).
#include "fuzz_util.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/tf_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string prefix = t5x_fuzz::scratch_dir() + "/model.ckpt-1";
  t5x_fuzz::write_file(prefix + ".index", t5x_fuzz::as_text(data, size));
  try {
    const auto reader = t5x::tf::TfBundleReader::open(prefix);
    for (const auto& name : reader.names()) (void)reader.verify(name);
  } catch (const t5x::CheckpointError&) {
  }
  return 0;
}
