#include "t5x/checkpoints/tf_convert.h"

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/meshtf_mapping.h"
#include "t5x/checkpoints/tf_bundle.h"

namespace t5x {

TfImportResult import_tf_checkpoint(const std::string& prefix, const std::string& model_dir,
                                    const TfImportOptions& opt) {
  MeshTfImport im = import_meshtf(tf::TfBundleReader::open(prefix));
  TfImportResult res;
  int64_t step = 0;
  if (auto it = im.leaves.find("state/step"); it != im.leaves.end()) step = it->second.values<int32_t>().at(0);
  res.step = opt.step.value_or(step);
  std::vector<SaveLeaf> leaves;
  for (auto& [path, t] : im.leaves) {
    if (path == "state/step") continue;
    const bool target = path.rfind("target/", 0) == 0;
    HostTensor v = std::move(t);
    if (target && !opt.dtype.empty() && v.dtype != opt.dtype) v = cast_host_tensor(v, opt.dtype);
    if (im.source.at(path).empty()) {
      ++res.num_placeholders;
      leaves.push_back(SaveLeaf::inline_array(path, std::move(v)));
      continue;
    }
    (target ? res.num_params : res.num_slots) += 1;
    std::vector<int64_t> shape = v.shape;
    SaveLeaf l = SaveLeaf::sharded(path, std::move(v), shape, IndexBox::full(shape));
    l.chunks = t5x_chunk_shape(shape, dtype_itemsize(l.data.dtype));
    leaves.push_back(std::move(l));
  }
  leaves.push_back(SaveLeaf::inline_array(
      "state/step", HostTensor::from_values<int32_t>("int32", {}, {int32_t(res.step)})));
  SaveOptions so;
  so.compressor = opt.compressor;
  so.save_dtype = "";
  so.durable = opt.durable;
  fileio::make_dirs(model_dir);
  SaveResult r = save_checkpoint(model_dir, res.step, leaves, so);
  if (r.skipped_existing)
    throw CheckpointError(r.dir + " already exists; choose another --step or MODEL_DIR");
  res.dir = r.dir;
  return res;
}

}  // namespace t5x
