// Restores a checkpoint written by scripts/golden/ckpt_make_t5x_layout.py
// (tensorstore + msgpack, laid out exactly like t5x's Checkpointer) and one
// written by scripts/golden/ckpt_make_orbax.py (orbax-checkpoint, as t5x saves
// by default), and checks every leaf against the values recorded by the
// scripts. No Python at test time, so these run under the sanitizers too.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"

namespace t5x {
namespace {

const std::string kGolden = std::string(T5X_SOURCE_DIR) + "/tests/golden/checkpoints";

std::vector<double> as_doubles(const HostTensor& t) {
  std::vector<double> out;
  if (t.dtype == "int32") for (auto v : t.values<int32_t>()) out.push_back(v);
  else for (auto v : cast_host_tensor(t, "float32").values<float>()) out.push_back(v);
  return out;
}

TEST(GoldenT5xLayout, RestoresEveryLeafWithDtypeAndValues) {
  auto expected = nlohmann::json::parse(fileio::read_text(kGolden + "/t5x_layout_expected.json"));
  const std::string model_dir = kGolden + "/t5x_layout";
  EXPECT_EQ(latest_step(model_dir), expected["step"].get<int64_t>());
  StepScan scan = latest_valid_step(model_dir, {.verify = Verify::kDecode});
  EXPECT_EQ(scan.step, 7);
  EXPECT_TRUE(scan.skipped.empty()) << scan.report();

  CheckpointReader r = CheckpointReader::open(checkpoint_dir_for_step(model_dir, 7));
  EXPECT_EQ(r.version(), 3);
  EXPECT_EQ(r.step(), 7);
  for (const auto& [path, want] : expected["leaves"].items()) {
    SCOPED_TRACE(path);
    auto info = r.info(path);
    EXPECT_EQ(info.dtype, want["dtype"].get<std::string>());
    EXPECT_EQ(info.shape, want["shape"].get<std::vector<int64_t>>());
    HostTensor t = r.read_expect(path, want["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(as_doubles(t), want["values"].get<std::vector<double>>());
  }
  for (const auto& p : expected["tensorstore_leaves"]) EXPECT_TRUE(r.info(p.get<std::string>()).in_tensorstore);
  EXPECT_FALSE(r.info("state/step").in_tensorstore);
}

TEST(GoldenT5xLayout, ZarrayTextIsWhatWeWrite) {
  const std::string ckpt = kGolden + "/t5x_layout/checkpoint_7";
  for (auto dir : {"target.decoder.logits_dense.kernel", "target.encoder.layers_0.attention.query.kernel",
                   "target.encoder.encoder_norm.scale"}) {
    const std::string text = fileio::read_text(ckpt + "/" + dir + "/.zarray");
    EXPECT_EQ(zarr_read_metadata(ckpt + "/" + dir).to_json(), text) << dir;
  }
  // Spec leaves re-encode to the dicts TensorStore's Spec.to_json() produced.
  CheckpointReader r = CheckpointReader::open(ckpt);
  const auto& spec = std::get<TensorStoreSpec>(r.leaves().at("target/decoder/logits_dense/kernel"));
  EXPECT_EQ(spec.to_json().dump(),
            R"({"driver":"zarr","dtype":"bfloat16","kvstore":{"driver":"file","path":"target.decoder.logits_dense.kernel/"},)"
            R"("metadata":{"chunks":[4,16],"compressor":{"id":"gzip","level":1},"shape":[8,16]}})");
}

TEST(GoldenT5xLayout, SliceReadsAcrossChunks) {
  CheckpointReader r = CheckpointReader::open(kGolden + "/t5x_layout/checkpoint_7");
  HostTensor full = r.read("target/encoder/layers_0/attention/query/kernel");
  IndexBox b{{2, 4}, {6, 9}};  // crosses the 6-column chunk boundary
  HostTensor part = r.read("target/encoder/layers_0/attention/query/kernel", b);
  auto f = full.values<float>(), p = part.values<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(p[i * 5 + j], f[(2 + i) * 12 + 4 + j]);
}

TEST(GoldenOrbax, RestoresEveryLeafWithDtypeAndValues) {
  auto expected = nlohmann::json::parse(fileio::read_text(kGolden + "/orbax_t5x_expected.json"));
  const std::string model_dir = kGolden + "/orbax_t5x";
  EXPECT_EQ(latest_step(model_dir), 3);
  StepScan scan = latest_valid_step(model_dir, {.verify = Verify::kDecode});
  EXPECT_EQ(scan.step, 3);
  EXPECT_TRUE(scan.skipped.empty()) << scan.report();

  CheckpointReader r = CheckpointReader::open(checkpoint_dir_for_step(model_dir, 3));
  ASSERT_NE(r.orbax_store(), nullptr);
  EXPECT_EQ(r.version(), 0);
  EXPECT_EQ(r.step(), 3);
  std::vector<std::string> paths;
  for (const auto& [path, want] : expected["leaves"].items()) {
    SCOPED_TRACE(path);
    paths.push_back(path);
    auto info = r.info(path);
    EXPECT_TRUE(info.in_tensorstore);
    EXPECT_EQ(info.dtype, want["dtype"].get<std::string>());
    EXPECT_EQ(info.shape, want["shape"].get<std::vector<int64_t>>());
    HostTensor t = r.read_expect(path, want["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(as_doubles(t), want["values"].get<std::vector<double>>());
  }
  EXPECT_EQ(r.array_paths(), paths);  // nothing more, nothing less
  // Two keys per array (.zarray and its one chunk) in the top-level store,
  // which Orbax merges from ocdbt.process_0's.
  EXPECT_EQ(r.orbax_store()->size(), 2 * paths.size());
  EXPECT_TRUE(r.orbax_store()->has("target.token_embedder.embedding/0.0"));
  EXPECT_TRUE(r.orbax_store()->has("state.step/0"));
}

}  // namespace
}  // namespace t5x
