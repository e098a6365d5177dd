// Checkpoint inspection (`t5x ckpt info`): path resolution, logical axes from
// model-info.txt, per-array digests, totals.
#include "t5x/checkpoints/inspect.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/model_info.h"
#include "../../common/tmpdir.h"

namespace t5x {
namespace {

namespace fs = std::filesystem;

using t5x_test::tmpdir;

void save_small(const std::string& model_dir, int64_t step, float offset) {
  std::vector<float> k(24);
  for (size_t i = 0; i < k.size(); ++i) k[i] = float(i) * 0.5f + offset;
  std::vector<SaveLeaf> leaves;
  leaves.push_back(SaveLeaf::sharded("target/encoder/layers_0/mlp/wi/kernel",
                                     HostTensor::from_values<float>("float32", {4, 6}, k), {4, 6}, IndexBox::full({4, 6})));
  leaves.push_back(SaveLeaf::inline_array("state/step", HostTensor::from_values<int32_t>("int32", {}, {int32_t(step)})));
  SaveOptions o;
  o.durable = false;
  save_checkpoint(model_dir, step, leaves, o);
}

TEST(Inspect, DigestKnownAnswerAndSensitivity) {
  // FNV-1a 64 of the single byte "a" (dtype name, empty shape, no data).
  HostTensor a;
  a.dtype = "a";
  EXPECT_EQ(digest_hex(tensor_digest(a)), "af63dc4c8601ec8c");
  HostTensor x = HostTensor::from_values<float>("float32", {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor y = x;
  EXPECT_EQ(tensor_digest(x), tensor_digest(y));
  y.shape = {3, 2};  // same bytes, other shape
  EXPECT_NE(tensor_digest(x), tensor_digest(y));
  y = x;
  y.data[5] ^= 1;  // one bit
  EXPECT_NE(tensor_digest(x), tensor_digest(y));
}

// A model-info.txt line with a 200000-character name overflowed the stack in
// std::regex (a segfault of `t5x ckpt info`); it is now one more entry.
TEST(Inspect, ModelInfoWithALongLineIsRead) {
  const std::string m = tmpdir("model_info_long");
  const std::string path = m + "/model-info.txt";
  const std::string long_name(200000, 'a');
  std::ofstream(path) << "Variable " << long_name << " size 6 shape (embed=2, mlp=3) Partitioned\n"
                      << "Variable short size 4 shape (4,)\n"        // unnamed dims: no entry
                      << "Variable dec/k   size 12 shape  (heads=3, kv=4)\n"
                      << "Variable broken size x shape (a=1)\n"     // not a size: skipped
                      << "Total Parameters: 22\n";
  const auto axes = read_model_info_axes(path);
  EXPECT_EQ(axes.size(), 2u);
  EXPECT_EQ(axes.at(long_name), (std::vector<std::string>{"embed", "mlp"}));
  EXPECT_EQ(axes.at("dec/k"), (std::vector<std::string>{"heads", "kv"}));
}

TEST(Inspect, ModelDirResolvesToNewestCompleteStepWithAxesAndDigests) {
  const std::string m = tmpdir("model");
  save_small(m, 2, 0.f);
  save_small(m, 4, 1.f);
  write_model_info(m + "/model-info.txt", {{"encoder/layers_0/mlp/wi/kernel", {4, 6}, {"embed", "mlp"}, "(None, 'model')"}});
  EXPECT_EQ(read_model_info_axes(m + "/model-info.txt").at("encoder/layers_0/mlp/wi/kernel"),
            (std::vector<std::string>{"embed", "mlp"}));

  CheckpointInventory inv = inspect_checkpoint(m, {.digest = true});
  EXPECT_EQ(inv.dir, checkpoint_dir_for_step(m, 4));
  EXPECT_EQ(inv.step, 4);
  ASSERT_EQ(inv.arrays.size(), 2u);
  EXPECT_EQ(inv.arrays[0].path, "target/encoder/layers_0/mlp/wi/kernel");  // target/ first
  EXPECT_EQ(inv.arrays[0].logical_axes, (std::vector<std::string>{"embed", "mlp"}));
  EXPECT_EQ(inv.arrays[0].numel, 24);
  EXPECT_EQ(inv.arrays[0].nbytes, 96u);
  EXPECT_EQ(inv.arrays[0].storage, "zarr/gzip");
  EXPECT_GT(inv.arrays[0].disk_bytes, 0u);
  EXPECT_EQ(inv.arrays[1].storage, "inline");
  const std::string text = format_inventory(inv);
  EXPECT_NE(text.find("(embed=4, mlp=6)"), std::string::npos) << text;
  EXPECT_NE(text.find("parameters: 24 (96 B)"), std::string::npos) << text;

  // Digests: equal for equal arrays, different where the values differ.
  CheckpointInventory two = inspect_checkpoint(checkpoint_dir_for_step(m, 2), {.digest = true});
  EXPECT_NE(two.arrays[0].digest, inv.arrays[0].digest);
  const std::string copy = tmpdir("copy");
  save_small(copy, 4, 1.f);
  CheckpointInventory same = inspect_checkpoint(copy, {.digest = true});
  EXPECT_EQ(format_digests(same), format_digests(inv));
}

TEST(Inspect, DamagedNewestIsSkippedAndReported) {
  const std::string m = tmpdir("damaged");
  save_small(m, 2, 0.f);
  save_small(m, 4, 1.f);
  fs::resize_file(checkpoint_dir_for_step(m, 4) + "/checkpoint", 10);
  std::string note;
  EXPECT_EQ(resolve_checkpoint_path(m, &note), checkpoint_dir_for_step(m, 2));
  EXPECT_NE(note.find("skipped " + checkpoint_dir_for_step(m, 4)), std::string::npos) << note;
  // A direct path to the damaged step is an error that names its msgpack.
  try {
    inspect_checkpoint(checkpoint_dir_for_step(m, 4));
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(checkpoint_dir_for_step(m, 4) + "/checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_checkpoint_path(m + "/missing"), CheckpointError);
  fs::create_directories(m + "/empty");
  EXPECT_THROW(resolve_checkpoint_path(m + "/empty"), CheckpointError);
}

}  // namespace
}  // namespace t5x
