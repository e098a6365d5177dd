// TensorBundle (TF v2 checkpoint) reader and writer: CRC and slice-key test
// vectors from ../shared/reference/meshtf-checkpoints.md, the Google-written
// Mesh-TF index in ../shared/fixtures/mtf_tiny_t5/, a TensorFlow-written
// fixture (tests/data/tf_mtf_tiny/, scripts/golden/tf_meshtf_checkpoint.py), and
// every bad-file case with its exact message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/dtype_bf16.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/meshtf_mapping.h"
#include "t5x/checkpoints/tf_bundle.h"
#include "error_of.h"

namespace t5x::tf {
namespace {

namespace fs = std::filesystem;

const std::string kGoogle = std::string(T5X_SOURCE_DIR) + "/../shared/fixtures/mtf_tiny_t5/model.ckpt-0";
const std::string kFixture = std::string(T5X_SOURCE_DIR) + "/tests/data/tf_mtf_tiny/model.ckpt-2";
const std::string kOriginal = std::string(T5X_SOURCE_DIR) + "/tests/data/tf_mtf_tiny/t5x/checkpoint_2";

std::string tmp(const std::string& name) {
  auto d = fs::temp_directory_path() / ("t5x_tf_bundle_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string hexs(const std::string& s) {
  std::string o;
  char b[4];
  for (unsigned char c : s) {
    std::snprintf(b, sizeof b, "%02x", c);
    o += b;
  }
  return o;
}

using testing_ckpt::error_of;

TEST(TfBundle, Crc32cAndMask) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32c(reinterpret_cast<const uint8_t*>(s.data()), s.size()), 0xE3069283u);
  const uint8_t zeros[8] = {};
  EXPECT_EQ(crc_mask(crc32c(zeros, 8)), 0x07980329u);  // stored crc of int64 global_step = 0
  EXPECT_EQ(crc_unmask(crc_mask(0xdeadbeefu)), 0xdeadbeefu);
}

TEST(TfBundle, SliceKeysMatchTensorFlow) {
  // shared/embedding [10,4] stored as rows 0-5 and 6-9 (verified against TF).
  EXPECT_EQ(hexs(slice_key("shared/embedding", {{0, 6}, {0, -1}})),
            "00" + hexs("shared/embedding") + "0001" "0102" "8086" "807f");
  EXPECT_EQ(hexs(slice_key("shared/embedding", {{6, 4}, {0, -1}})),
            "00" + hexs("shared/embedding") + "0001" "0102" "8684" "807f");
  // Two-byte numbers: 1000 -> c3 e8; -1000 -> 3c 18; 576 -> c2 40.
  EXPECT_EQ(hexs(slice_key("x", {{1000, 576}})), "00" "78" "0001" "0101" "c3e8" "c240");
  EXPECT_EQ(hexs(slice_key("x", {{-1000, 64}})), "00" "78" "0001" "0101" "3c18" "c040");
  EXPECT_EQ(slice_string({{0, 576}, {0, -1}}), "[0:576, :]");
}

TEST(TfBundle, GoogleWrittenMeshTfIndexListsAndValidates) {
  TfBundleReader r = TfBundleReader::open(kGoogle);
  EXPECT_EQ(r.num_shards(), 2);
  EXPECT_TRUE(r.had_snappy_block());
  const auto names = r.names();
  ASSERT_EQ(names.size(), 105u);
  int bf16 = 0, f32_slots = 0;
  for (const auto& n : names) {
    const TfEntry& e = r.entry(n);
    if (e.dtype == "bfloat16") ++bf16;
    if (e.dtype == "float32" && n.ends_with("_slot_v")) ++f32_slots;
    EXPECT_TRUE(meshtf_to_t5x_path(n).has_value()) << n;
  }
  EXPECT_EQ(bf16, 52);
  EXPECT_EQ(f32_slots, 52);
  const TfEntry& q = r.entry("encoder/block_000/layer_000/SelfAttention/q");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(q.dtype, "bfloat16");
  EXPECT_EQ(q.size, 32 * 128 * 2);
  EXPECT_EQ(r.entry("decoder/logits/kernel").shape, (std::vector<int64_t>{32, 32128}));
  EXPECT_EQ(r.entry("shared/embedding").shape, (std::vector<int64_t>{32128, 32}));
  EXPECT_EQ(r.entry("encoder/block_000/layer_000/SelfAttention/relative_attention_bias").shape,
            (std::vector<int64_t>{2, 32}));
  // Shard 0 (present) holds global_step = 0 with its CRC; shard 1 is absent.
  const TfEntry& gs = r.entry("global_step");
  EXPECT_EQ(gs.dtype, "int64");
  EXPECT_EQ(gs.masked_crc, 0x07980329u);
  HostTensor step = r.read("global_step");
  EXPECT_EQ(step.values<int64_t>(), std::vector<int64_t>{0});
  EXPECT_EQ(*r.verify("encoder/block_000/layer_000/SelfAttention/q"),
            kGoogle + ".data-00001-of-00002: missing (needed for tensor "
                      "'encoder/block_000/layer_000/SelfAttention/q')\n  hint: every PREFIX.data-*-of-2 file belongs "
                      "to the checkpoint");
  // Offsets in shard 1 are contiguous (alignment 1).
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& n : names)
    if (r.entry(n).shard_id == 1) spans.push_back({r.entry(n).offset, r.entry(n).size});
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (auto [off, size] : spans) {
    EXPECT_EQ(off, at);
    at = off + size;
  }
}

std::vector<TfWriteTensor> small_tensors() {
  std::vector<TfWriteTensor> v;
  std::vector<bfloat16> emb;
  for (int i = 0; i < 40; ++i) emb.push_back(bfloat16(float(i) / 7.0f));
  HostTensor full = HostTensor::from_values<bfloat16>("bfloat16", {10, 4}, emb);
  for (auto [start, len] : {std::pair{0, 6}, std::pair{6, 4}}) {
    TfWriteTensor t;
    t.name = "shared/embedding";
    t.data = HostTensor::zeros("bfloat16", {len, 4});
    std::memcpy(t.data.data.data(), full.data.data() + start * 8, size_t(len) * 8);
    t.shard = start == 0 ? 0 : 1;
    t.full_shape = {10, 4};
    t.slice = {{start, len}, {0, -1}};
    v.push_back(t);
  }
  v.push_back({"global_step", HostTensor::from_values<int64_t>("int64", {}, {7}), 0, {}, {}});
  v.push_back({"encoder/rms_norm/scale", HostTensor::from_values<float>("float32", {4}, {1, 2, 3, 4}), 1, {}, {}});
  v.push_back({"encoder/rms_norm/scale_slot_v", HostTensor::from_values<float>("float32", {4}, {.5, .25, 0, 1}), 1, {}, {}});
  v.push_back({"decoder/block_000/layer_000/SelfAttention/q",
               HostTensor::from_values<int32_t>("int32", {2, 3}, {1, -2, 3, -4, 5, -6}), 1, {}, {}});
  return v;
}

TEST(TfBundle, WriterRoundTripWithSnappyAndSlices) {
  const std::string d = tmp("rt");
  const std::string p = d + "/model.ckpt-7";
  auto ts = small_tensors();
  // A realistic number of entries: index blocks of a few tensors do not
  // compress by the 12.5% that the table writer requires to keep snappy.
  for (int b = 0; b < 12; ++b)
    for (const char* w : {"q", "k", "v", "o"}) {
      char n[80];
      std::snprintf(n, sizeof n, "encoder/block_%03d/layer_000/SelfAttention/%s", b, w);
      ts.push_back({n, HostTensor::zeros("bfloat16", {8, 8}), b % 2, {}, {}});
    }
  write_tf_bundle(p, ts);
  ASSERT_TRUE(is_tf_checkpoint(p));
  TfBundleReader plain = (write_tf_bundle(d + "/plain", ts, {.snappy = false}), TfBundleReader::open(d + "/plain"));
  EXPECT_FALSE(plain.had_snappy_block());
  EXPECT_EQ(plain.names(), TfBundleReader::open(p).names());
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_TRUE(r.had_snappy_block());
  EXPECT_EQ(r.num_shards(), 2);
  EXPECT_EQ(r.names().size(), 5u + 48u);
  EXPECT_EQ(r.names().front(), "decoder/block_000/layer_000/SelfAttention/q");
  EXPECT_EQ(r.names().back(), "shared/embedding");
  HostTensor emb = r.read("shared/embedding");
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{10, 4}));
  EXPECT_EQ(emb.dtype, "bfloat16");
  for (int i = 0; i < 40; ++i) EXPECT_EQ(float(emb.values<bfloat16>()[i]), float(bfloat16(float(i) / 7.0f)));
  EXPECT_EQ(r.entry("shared/embedding").slices.size(), 2u);
  EXPECT_EQ(r.read("global_step").values<int64_t>(), std::vector<int64_t>{7});
  EXPECT_EQ(r.read("decoder/block_000/layer_000/SelfAttention/q").values<int32_t>(),
            (std::vector<int32_t>{1, -2, 3, -4, 5, -6}));
  // The import maps names, adds t5x's placeholders and casts the step.
  MeshTfImport im = import_meshtf(r);
  EXPECT_EQ(im.leaves.at("state/step").values<int32_t>(), std::vector<int32_t>{7});
  EXPECT_EQ(im.leaves.at("state/param_states/encoder/encoder_norm/scale/v").values<float>(),
            (std::vector<float>{.5, .25, 0, 1}));
  EXPECT_EQ(im.leaves.at("state/param_states/encoder/encoder_norm/scale/v_row").shape, std::vector<int64_t>{1});
  EXPECT_EQ(im.leaves.at("state/param_states/token_embedder/embedding/m").shape, std::vector<int64_t>{1});
  EXPECT_FALSE(im.leaves.count("state/param_states/token_embedder/embedding/v_row"));
  EXPECT_EQ(im.source.at("target/decoder/layers_0/self_attention/query/kernel"),
            "decoder/block_000/layer_000/SelfAttention/q");
  fs::remove_all(d);
}

TEST(MeshTfMapping, T5xImporterRules) {
  auto m = [](const std::string& n) { return meshtf_to_t5x_path(n).value_or("<unmapped>"); };
  EXPECT_EQ(m("global_step"), "state/step");
  EXPECT_EQ(m("shared/embedding"), "target/token_embedder/embedding");
  EXPECT_EQ(m("shared/embedding_slot_vr"), "state/param_states/token_embedder/embedding/v_row");
  EXPECT_EQ(m("shared/embedding_slot_vc"), "state/param_states/token_embedder/embedding/v_col");
  EXPECT_EQ(m("encoder/embedding"), "target/encoder/token_embedder/embedding");
  EXPECT_EQ(m("transformer/embedding_slot_v"), "state/param_states/decoder/token_embedder/embedding/v");
  EXPECT_EQ(m("encoder/block_011/layer_000/SelfAttention/relative_attention_bias"),
            "target/encoder/layers_11/relpos_bias/rel_embedding");
  EXPECT_EQ(m("encoder/block_003/layer_000/SelfAttention/o"), "target/encoder/layers_3/attention/out/kernel");
  EXPECT_EQ(m("decoder/block_001/layer_000/SelfAttention/v_slot_v"),
            "state/param_states/decoder/layers_1/self_attention/value/kernel/v");
  EXPECT_EQ(m("decoder/block_001/layer_001/EncDecAttention/k_slot_vc"),
            "state/param_states/decoder/layers_1/encoder_decoder_attention/key/kernel/v_col");
  EXPECT_EQ(m("encoder/block_000/layer_001/DenseReluDense/wi/kernel"), "target/encoder/layers_0/mlp/wi/kernel");
  EXPECT_EQ(m("decoder/block_000/layer_002/DenseReluDense/wi_1/kernel_slot_vr"),
            "state/param_states/decoder/layers_0/mlp/wi_1/kernel/v_row");
  EXPECT_EQ(m("encoder/block_000/layer_001/layer_norm/scale"), "target/encoder/layers_0/pre_mlp_layer_norm/scale");
  EXPECT_EQ(m("encoder/block_000/layer_000/rms_norm/scale"), "target/encoder/layers_0/pre_attention_layer_norm/scale");
  EXPECT_EQ(m("decoder/block_002/layer_001/rms_norm/scale"),
            "target/decoder/layers_2/pre_cross_attention_layer_norm/scale");
  EXPECT_EQ(m("transformer/block_000/layer_001/rms_norm/scale"), "target/decoder/layers_0/pre_mlp_layer_norm/scale");
  EXPECT_EQ(m("encoder/final_layer_norm/scale"), "target/encoder/encoder_norm/scale");
  EXPECT_EQ(m("decoder/rms_norm/scale_slot_v"), "state/param_states/decoder/decoder_norm/scale/v");
  EXPECT_EQ(m("decoder/logits/kernel"), "target/decoder/logits_dense/kernel");
  EXPECT_EQ(m("transformer/logits/kernel_slot_vc"), "state/param_states/decoder/logits_dense/kernel/v_col");
  EXPECT_EQ(m("shared/embedding_slot_m"), "<unmapped>");  // beta1 slots: t5x has no rule
  EXPECT_EQ(m("encoder/block_000/layer_002/rms_norm/scale"), "<unmapped>");
  EXPECT_EQ(m("decoder/block_000/layer_001/EncDecAttention/relative_attention_bias"), "<unmapped>");
}

// The fixture written by TensorFlow 2.21 (SaveV2 twice + MergeV2Checkpoints):
// everything reads, and this library's writer, given the same tensors in the
// same shard order, produces TensorFlow's index byte for byte (uncompressed)
// and a snappy index that reads back the same.
TEST(TfBundle, TensorFlowWrittenFixtureAndOurWriterAgree) {
  TfBundleReader r = TfBundleReader::open(kFixture);
  EXPECT_EQ(r.num_shards(), 2);
  EXPECT_FALSE(r.had_snappy_block());  // open-source TensorFlow never compresses
  const TfEntry& emb = r.entry("shared/embedding");
  EXPECT_EQ(emb.dtype, "bfloat16");
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{1152, 8}));
  ASSERT_EQ(emb.slices.size(), 2u);
  EXPECT_EQ(slice_string(emb.slices[0]), "[0:576, :]");
  EXPECT_EQ(slice_string(emb.slices[1]), "[576:1152, :]");
  // Adafactor's factored second moments (Mesh-TF optimize.py: vr drops the
  // largest dim, vc the second largest) and the unfactored v of a norm.
  EXPECT_EQ(r.entry("shared/embedding_slot_vr").dtype, "float32");
  EXPECT_EQ(r.entry("shared/embedding_slot_vr").shape, std::vector<int64_t>{8});
  EXPECT_EQ(r.entry("shared/embedding_slot_vc").shape, std::vector<int64_t>{1152});
  EXPECT_EQ(r.entry("encoder/block_000/layer_001/DenseReluDense/wo/kernel_slot_vr").shape, std::vector<int64_t>{8});
  EXPECT_EQ(r.entry("encoder/block_000/layer_001/DenseReluDense/wo/kernel_slot_vc").shape, std::vector<int64_t>{16});
  EXPECT_FALSE(r.has("shared/embedding_slot_v"));
  EXPECT_EQ(r.entry("encoder/rms_norm/scale_slot_v").dtype, "float32");
  EXPECT_EQ(r.entry("global_step").dtype, "int64");
  EXPECT_EQ(r.read("global_step").values<int64_t>(), std::vector<int64_t>{2});
  EXPECT_TRUE(r.has("encoder/block_001/layer_001/rms_norm/scale"));
  EXPECT_TRUE(r.has("decoder/block_001/layer_002/layer_norm/scale"));
  EXPECT_TRUE(r.has("decoder/final_layer_norm/scale"));
  // Rebuild the writer's input in TensorFlow's data order.
  struct Stored {
    int shard;
    int64_t offset;
    TfWriteTensor t;
  };
  std::vector<Stored> all;
  for (const auto& n : r.names()) {
    const TfEntry& e = r.entry(n);
    HostTensor full = r.read(n);
    EXPECT_FALSE(r.verify(n).has_value()) << n;
    if (e.slices.empty()) {
      all.push_back({e.shard_id, e.offset, {n, full, e.shard_id, {}, {}}});
      continue;
    }
    for (const auto& s : e.slices) {
      const TfEntry* se = r.slice_entry(n, s);
      ASSERT_NE(se, nullptr);
      IndexBox box;
      for (size_t d = 0; d < s.size(); ++d) {
        box.start.push_back(s[d].length < 0 ? 0 : s[d].start);
        box.stop.push_back(s[d].length < 0 ? e.shape[d] : s[d].start + s[d].length);
      }
      HostTensor part = HostTensor::zeros(e.dtype, box.extent());
      copy_box(full.data.data(), IndexBox::full(e.shape), part.data.data(), box, dtype_itemsize(e.dtype));
      all.push_back({se->shard_id, se->offset, {n, part, se->shard_id, e.shape, s}});
    }
  }
  std::sort(all.begin(), all.end(), [](const Stored& a, const Stored& b) {
    return std::pair(a.shard, a.offset) < std::pair(b.shard, b.offset);
  });
  std::vector<TfWriteTensor> ts;
  for (auto& s : all) ts.push_back(s.t);
  const std::string d = tmp("tfwriter");
  write_tf_bundle(d + "/plain", ts, {.snappy = false});
  EXPECT_EQ(fileio::read_file(d + "/plain.index"), fileio::read_file(kFixture + ".index"));
  for (const char* sh : {".data-00000-of-00002", ".data-00001-of-00002"})
    EXPECT_EQ(fileio::read_file(d + "/plain" + sh), fileio::read_file(kFixture + sh)) << sh;
  write_tf_bundle(d + "/snappy", ts);
  TfBundleReader z = TfBundleReader::open(d + "/snappy");
  EXPECT_TRUE(z.had_snappy_block());
  EXPECT_EQ(z.names(), r.names());
  for (const auto& n : r.names()) {
    EXPECT_EQ(z.read(n), r.read(n)) << n;
    EXPECT_EQ(z.entry(n).masked_crc, r.entry(n).masked_crc) << n;
  }
  fs::remove_all(d);
}

// The TensorFlow-written `_slot_vr` / `_slot_vc` land in t5x's factored state
// (SLOT_MAP: vr -> v_row, vc -> v_col, nothing swapped) with the bits of the
// t5x.cpp Adafactor state they were written from; factored parameters get a
// (1,) `v` placeholder, unfactored ones (1,) `v_row` / `v_col`.
TEST(TfBundle, FactoredAdafactorSlotsImportBitwise) {
  MeshTfImport im = import_meshtf(TfBundleReader::open(kFixture));
  CheckpointReader orig = CheckpointReader::open(kOriginal);
  int factored = 0, whole = 0;
  for (const auto& path : orig.array_paths()) {
    if (!path.starts_with("state/param_states/")) continue;
    ASSERT_TRUE(im.leaves.count(path)) << path;
    EXPECT_EQ(im.leaves.at(path), orig.read(path)) << path;
    const bool placeholder = orig.info(path).shape == std::vector<int64_t>{1};
    if (!placeholder && (path.ends_with("/v_row") || path.ends_with("/v_col"))) ++factored;
    if (!placeholder && path.ends_with("/v")) ++whole;
  }
  EXPECT_EQ(factored, 2 * 38);  // 36 attention/MLP kernels, the embedding and the logits
  EXPECT_EQ(whole, 14);         // norm scales and the two relpos biases
  const HostTensor& vr = im.leaves.at("state/param_states/decoder/layers_1/mlp/wi_0/kernel/v_row");
  EXPECT_EQ(im.source.at("state/param_states/decoder/layers_1/mlp/wi_0/kernel/v_row"),
            "decoder/block_001/layer_002/DenseReluDense/wi_0/kernel_slot_vr");
  EXPECT_EQ(vr.dtype, "float32");
  EXPECT_EQ(vr.shape, std::vector<int64_t>{8});
  EXPECT_EQ(im.leaves.at("state/param_states/decoder/layers_1/mlp/wi_0/kernel/v_col").shape, std::vector<int64_t>{16});
  EXPECT_EQ(im.leaves.at("state/param_states/decoder/layers_1/mlp/wi_0/kernel/v").shape, std::vector<int64_t>{1});
  EXPECT_EQ(im.source.at("state/param_states/decoder/layers_1/mlp/wi_0/kernel/v"), "");
  EXPECT_EQ(im.leaves.at("state/param_states/encoder/encoder_norm/scale/v_row").shape, std::vector<int64_t>{1});
}

// A directory with TensorFlow's `checkpoint` state file stands for its newest
// prefix (model_checkpoint_path); a t5x checkpoint's msgpack `checkpoint` file
// does not.
TEST(TfBundle, StateFileDirectoryResolvesToNewestPrefix) {
  const std::string google_dir = fs::path(kGoogle).parent_path().string();
  EXPECT_EQ(tf_checkpoint_prefix(google_dir), google_dir + "/model.ckpt-0");
  EXPECT_EQ(TfBundleReader::open(*tf_checkpoint_prefix(google_dir)).names().size(), 105u);
  EXPECT_EQ(tf_checkpoint_prefix(kFixture), kFixture);
  EXPECT_EQ(tf_checkpoint_prefix(kOriginal), std::nullopt);
  EXPECT_EQ(tf_checkpoint_prefix(fs::path(kFixture).parent_path().string()), std::nullopt);  // no state file
  const std::string d = tmp("state");
  auto state = [&](const std::string& text) { fileio::write_text(d + "/checkpoint", text, false); };
  write_tf_bundle(d + "/model.ckpt-5", small_tensors());
  write_tf_bundle(d + "/model.ckpt-9", small_tensors());
  state("model_checkpoint_path: \"model.ckpt-9\"\nall_model_checkpoint_paths: \"model.ckpt-5\"\n"
        "all_model_checkpoint_paths: \"model.ckpt-9\"\n");
  EXPECT_EQ(tf_checkpoint_prefix(d), d + "/model.ckpt-9");
  EXPECT_EQ(CheckpointReader::open(d).dir(), d + "/model.ckpt-9");
  EXPECT_EQ(CheckpointReader::open(d).step(), 7);
  // Absolute paths are kept; one that is not here (a copy from GCS) falls
  // back to its last component in the directory.
  state("model_checkpoint_path: \"" + d + "/model.ckpt-5\"\n");
  EXPECT_EQ(tf_checkpoint_prefix(d), d + "/model.ckpt-5");
  state("model_checkpoint_path: \"gs://t5-data/pretrained_models/small/model.ckpt-9\"\n");
  EXPECT_EQ(tf_checkpoint_prefix(d), d + "/model.ckpt-9");
  state("model_checkpoint_path: \"model.ckpt-12\"\n");
  EXPECT_EQ(error_of([&] { tf_checkpoint_prefix(d); }),
            d + "/checkpoint: model_checkpoint_path \"model.ckpt-12\" names " + d + "/model.ckpt-12, but " + d +
                "/model.ckpt-12.index is missing\n  hint: the newest checkpoint's files are not in " + d);
  state("model_checkpoint_path: model.ckpt-9\n");
  EXPECT_EQ(error_of([&] { tf_checkpoint_prefix(d); }),
            d + "/checkpoint: TensorFlow checkpoint state file: expected a quoted, non-empty model_checkpoint_path "
                "at offset 23");
  fs::remove_all(d);
}

// ---- Bad files: each message names the file, the offset and the tensor ----

class TfBundleBad : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = tmp("bad");
    p = dir + "/model.ckpt-7";
    write_tf_bundle(p, small_tensors());
  }
  void TearDown() override { fs::remove_all(dir); }
  std::vector<uint8_t> bytes(const std::string& f) { return fileio::read_file(f); }
  void put(const std::string& f, const std::vector<uint8_t>& b) { fileio::write_file(f, b, false); }
  std::string dir, p;
};

TEST_F(TfBundleBad, MissingIndex) {
  fs::remove(p + ".index");
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: missing\n  hint: a TensorFlow checkpoint PREFIX has PREFIX.index and PREFIX.data-*-of-*; "
                "give the prefix, e.g. .../model.ckpt-1000000");
}

TEST_F(TfBundleBad, TruncatedIndex) {
  auto b = bytes(p + ".index");
  b.resize(20);
  put(p + ".index", b);
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: Corruption: file is too short to be an sstable (footer at offset 0, file size 20 bytes)\n"
                "  hint: the index is truncated or corrupt; copy the checkpoint again");
}

TEST_F(TfBundleBad, BadMagic) {
  auto b = bytes(p + ".index");
  b.back() ^= 0xff;
  put(p + ".index", b);
  const std::string n = std::to_string(b.size());
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: Corruption: not an sstable (bad magic number) (footer at offset " +
                std::to_string(b.size() - 48) + ", file size " + n +
                " bytes)\n  hint: the index is truncated or corrupt; copy the checkpoint again");
}

TEST_F(TfBundleBad, DataBlockCrc) {
  auto b = bytes(p + ".index");
  b[3] ^= 0x01;  // inside the first (only) data block, at offset 0
  put(p + ".index", b);
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: Corruption: block checksum mismatch (data block at offset 0, file size " +
                std::to_string(b.size()) + " bytes)\n  hint: the index is truncated or corrupt; copy the checkpoint again");
}

TEST_F(TfBundleBad, TruncatedDataShard) {
  const std::string f = p + ".data-00001-of-00002";
  auto b = bytes(f);
  b.resize(b.size() - 3);
  put(f, b);
  TfBundleReader r = TfBundleReader::open(p);
  const TfEntry& e = r.entry("decoder/block_000/layer_000/SelfAttention/q");
  EXPECT_EQ(error_of([&] { r.read(e.name); }),
            f + ": truncated: tensor 'decoder/block_000/layer_000/SelfAttention/q' needs bytes [" +
                std::to_string(e.offset) + ", " + std::to_string(e.offset + 24) + ") but the file has " +
                std::to_string(b.size()) + " bytes");
}

TEST_F(TfBundleBad, TensorCrcInASlice) {
  const std::string f = p + ".data-00001-of-00002";
  TfBundleReader r = TfBundleReader::open(p);
  auto b = bytes(f);
  b[0] ^= 0x40;  // the first bytes of shard 1: the slice [6:10, :] of shared/embedding
  put(f, b);
  const std::string msg = error_of([&] { r.read("shared/embedding"); });
  EXPECT_EQ(msg.substr(0, msg.find(" (stored")),
            f + ": tensor 'shared/embedding' slice [6:10, :] at offset 0 (32 bytes): crc32c mismatch");
  EXPECT_NE(msg.find("hint: the data file is corrupt"), std::string::npos) << msg;
  EXPECT_EQ(*r.verify("shared/embedding"), msg);
  EXPECT_FALSE(r.verify("global_step").has_value());
}

TEST_F(TfBundleBad, MissingShard) {
  fs::remove(p + ".data-00000-of-00002");
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_EQ(error_of([&] { r.read("global_step"); }),
            p + ".data-00000-of-00002: missing (needed for tensor 'global_step')\n  hint: every PREFIX.data-*-of-2 "
                "file belongs to the checkpoint");
}

TEST_F(TfBundleBad, SizeDisagreesWithShape) {
  TfWriteTensor t{"encoder/rms_norm/scale", HostTensor::from_values<float>("float32", {4}, {1, 2, 3, 4}), 0, {}, {}};
  t.data.shape = {5};  // 16 bytes stored for 5 float32
  write_tf_bundle(p, {t});
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_EQ(error_of([&] { r.read("encoder/rms_norm/scale"); }),
            p + ".index: tensor 'encoder/rms_norm/scale' (index block at offset 0): float32(5,) has size 16 bytes, expected 20");
}

TEST_F(TfBundleBad, UnmappedNames) {
  auto ts = small_tensors();
  ts.push_back({"encoder/block_000/layer_000/SelfAttention/q_slot_m",
                HostTensor::from_values<float>("float32", {1}, {0}), 0, {}, {}});
  ts.push_back({"foo/bar", HostTensor::from_values<float>("float32", {1}, {0}), 0, {}, {}});
  write_tf_bundle(p, ts);
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_EQ(error_of([&] { import_meshtf(r); }),
            p + ".index: Unmapped tensor keys exist: 'encoder/block_000/layer_000/SelfAttention/q_slot_m', "
                "'foo/bar'\n  hint: t5x.cpp imports Mesh-TF T5 names (t5x checkpoint_importer.py rules); Adafactor "
                "slots _slot_v/_slot_vr/_slot_vc only (no _slot_m)");
}

}  // namespace
}  // namespace t5x::tf
