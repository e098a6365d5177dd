#include "t5x/checkpoints/hf_convert.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <tuple>
#include <nlohmann/json.hpp>

#include "t5_test_shapes.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"
#include "../../common/tmpdir.h"

namespace t5x {
namespace {

namespace fs = std::filesystem;

using t5x_test::tmpdir;

NamedTensors save_tiny(const std::string& model_dir, bool gated, bool tied) {
  auto params = testing_util::random_params(testing_util::t5_param_shapes(40, 8, 4, 3, 16, 2, 2, gated, tied));
  std::vector<SaveLeaf> leaves;
  for (const auto& [n, t] : params)
    leaves.push_back(SaveLeaf::sharded("target/" + n, t, t.shape, IndexBox::full(t.shape)));
  leaves.push_back(SaveLeaf::inline_array("state/step", HostTensor::from_values<int32_t>("int32", {}, {100})));
  leaves.push_back(SaveLeaf::inline_array("state/param_states/encoder/encoder_norm/scale/v",
                                          HostTensor::zeros("float32", {8})));
  SaveOptions opt;
  opt.durable = false;
  save_checkpoint(model_dir, 100, leaves, opt);
  return params;
}

void expect_same_target(const std::string& ckpt, const NamedTensors& params) {
  CheckpointReader r = CheckpointReader::open(ckpt);
  for (const auto& [n, t] : params) EXPECT_EQ(r.read("target/" + n), t) << n;
}

TEST(HfConvert, ExportThenImportIsBitwise) {
  const std::string base = tmpdir("rt");
  NamedTensors params = save_tiny(base + "/model", true, false);
  HfExportResult ex = export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  EXPECT_EQ(ex.num_tensors, int64_t(params.size()));
  EXPECT_EQ(ex.config.feed_forward_proj, "gated-gelu");
  SafetensorsFile sf = read_safetensors(base + "/hf/model.safetensors");
  EXPECT_EQ(sf.metadata.at("format"), "pt");
  ASSERT_NE(sf.find("lm_head.weight"), nullptr);
  EXPECT_EQ(sf.find("lm_head.weight")->shape, (std::vector<int64_t>{40, 8}));
  auto cfg = nlohmann::json::parse(fileio::read_text(base + "/hf/config.json"));
  EXPECT_EQ(cfg["d_kv"], 3);
  EXPECT_EQ(cfg["num_layers"], 2);

  HfImportOptions io;
  io.step = 5;
  io.durable = false;
  std::string ck = import_hf_t5(base + "/hf", base + "/imported", io);
  EXPECT_EQ(ck, base + "/imported/checkpoint_5");
  expect_same_target(ck, params);
  EXPECT_EQ(CheckpointReader::open(ck).step(), 5);
  EXPECT_THROW(import_hf_t5(base + "/hf", base + "/imported", io), CheckpointError);  // exists
}

TEST(HfConvert, TiedReluAndShardedIndex) {
  const std::string base = tmpdir("tied");
  NamedTensors params = save_tiny(base + "/model", false, true);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  // Re-split the export into two shards with an index, as large HF models are.
  SafetensorsFile sf = read_safetensors(base + "/hf/model.safetensors");
  EXPECT_EQ(sf.find("lm_head.weight"), nullptr);
  NamedTensors a(sf.tensors.begin(), sf.tensors.begin() + 10), b(sf.tensors.begin() + 10, sf.tensors.end());
  fs::remove(base + "/hf/model.safetensors");
  write_safetensors(base + "/hf/model-00001-of-00002.safetensors", a, {{"format", "pt"}});
  write_safetensors(base + "/hf/model-00002-of-00002.safetensors", b, {{"format", "pt"}});
  nlohmann::json idx;
  for (auto& [n, t] : a) idx["weight_map"][n] = "model-00001-of-00002.safetensors";
  for (auto& [n, t] : b) idx["weight_map"][n] = "model-00002-of-00002.safetensors";
  fileio::write_text(base + "/hf/model.safetensors.index.json", idx.dump(), false);
  HfImportOptions io;
  io.durable = false;
  expect_same_target(import_hf_t5(base + "/hf", base + "/imported", io), params);
}

TEST(HfConvert, ImportRefusesShapesThatDisagreeWithConfig) {
  const std::string base = tmpdir("bad");
  save_tiny(base + "/model", true, false);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  auto cfg = nlohmann::json::parse(fileio::read_text(base + "/hf/config.json"));
  cfg["d_ff"] = 32;
  fileio::write_text(base + "/hf/config.json", cfg.dump(), false);
  try {
    import_hf_t5(base + "/hf", base + "/imported");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.block.0.layer.1.DenseReluDense.wi_0.weight (16, 8)"),
              std::string::npos)
        << e.what();
  }
}

// Layer counts in config.json must be the blocks the tensors hold (bad-input
// sweep, session 59: num_layers=1 over 2 blocks imported, and a run ignored
// the second; num_decoder_layers=0 imported); so must a usable epsilon.
TEST(HfConvert, ImportRefusesLayerCountsThatDisagreeWithTheTensors) {
  const std::string base = tmpdir("layers");
  save_tiny(base + "/model", true, false);  // 2 encoder and 2 decoder blocks
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  const auto good = nlohmann::json::parse(fileio::read_text(base + "/hf/config.json"));
  const std::tuple<const char*, nlohmann::json, const char*> cases[] = {
      {"num_layers", 1, "the tensors hold 2 encoder block(s), config.json's num_layers is 1"},
      {"num_layers", 5, "the tensors hold 2 encoder block(s), config.json's num_layers is 5"},
      {"num_decoder_layers", 0, "the tensors hold 2 decoder block(s), config.json's num_decoder_layers is 0"},
      {"layer_norm_epsilon", -1.0, "config.json's layer_norm_epsilon is -1"},
  };
  int k = 0;
  for (const auto& [key, value, message] : cases) {
    auto cfg = good;
    cfg[key] = value;
    fileio::write_text(base + "/hf/config.json", cfg.dump(), false);
    try {
      import_hf_t5(base + "/hf", base + "/imported" + std::to_string(k++));
      ADD_FAILURE() << key << " = " << value.dump() << " imported";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

// transformers 5 unties encoder/decoder.embed_tokens from shared.weight in a
// model made with tie_word_embeddings=False; t5x has one embedding.
TEST(HfConvert, ImportRefusesEmbedTokensThatDifferFromShared) {
  const std::string base = tmpdir("embed");
  save_tiny(base + "/model", true, false);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  const std::string file = base + "/hf/model.safetensors";
  NamedTensors hf = read_safetensors(file).tensors;
  HostTensor shared;
  for (const auto& [n, t] : hf) if (n == "shared.weight") shared = t;
  hf.emplace_back("encoder.embed_tokens.weight", shared);  // an equal copy is fine
  write_safetensors(file, hf, {{"format", "pt"}});
  EXPECT_NO_THROW(import_hf_t5(base + "/hf", base + "/ok"));
  HostTensor other = shared;
  other.data[0] ^= 1;
  hf.emplace_back("decoder.embed_tokens.weight", other);
  write_safetensors(file, hf, {{"format", "pt"}});
  try {
    import_hf_t5(base + "/hf", base + "/imported");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("decoder.embed_tokens.weight differs from shared.weight"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(base + "/imported"));
}

// A damaged model.safetensors.index.json: an array, a missing or empty
// weight_map (read as no tensors), a shard name of another type (a bare
// nlohmann type_error without the file) or outside the directory.
TEST(HfConvert, DamagedShardIndexNamesTheFile) {
  const std::string base = tmpdir("badindex");
  const std::string idx = base + "/model.safetensors.index.json";
  auto err = [&](const std::string& text) {
    fileio::write_text(idx, text, false);
    try {
      read_hf_tensors(base);
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string("no CheckpointError");
  };
  for (const char* t : {"[1, 2]", "{}", R"({"weight_map": {}})", R"({"weight_map": [1]})"}) {
    const std::string e = err(t);
    EXPECT_NE(e.find(idx + ": no \"weight_map\" object"), std::string::npos) << t << ": " << e;
  }
  std::string e = err(R"({"weight_map": {"a.weight": 7}})");
  EXPECT_NE(e.find(idx + ": weight_map[\"a.weight\"] is 7, not the file name of a shard"), std::string::npos) << e;
  e = err(R"({"weight_map": {"a.weight": "../../etc/passwd"}})");
  EXPECT_NE(e.find(idx + ": weight_map[\"a.weight\"] is \"../../etc/passwd\""), std::string::npos) << e;
}

}  // namespace
}  // namespace t5x
