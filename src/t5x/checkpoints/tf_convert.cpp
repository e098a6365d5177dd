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
    leaves.push_back(SaveLeaf::whole(path, std::move(v)));
  }
  res.dir = save_converted_checkpoint(model_dir, res.step, std::move(leaves), opt.compressor, opt.durable);
  return res;
}

}  // namespace t5x
