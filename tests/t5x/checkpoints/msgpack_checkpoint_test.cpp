#include "t5x/checkpoints/msgpack_checkpoint.h"

#include <gtest/gtest.h>

#include "core/dtype_bf16.h"

namespace t5x {
namespace {

TEST(MsgpackCheckpoint, NdarrayPayloadMatchesFlaxBytes) {
  // flax _ndarray_to_bytes(np.array([1, 2], np.int32)) ==
  //   msgpack.packb(((2,), 'int32', b'\x01\0\0\0\x02\0\0\0'), use_bin_type=True)
  HostTensor t = HostTensor::from_values<int32_t>("int32", {2}, {1, 2});
  std::vector<uint8_t> want = {0x93, 0x91, 0x02, 0xa5, 'i', 'n', 't', '3', '2', 0xc4, 0x08,
                               1, 0, 0, 0, 2, 0, 0, 0};
  EXPECT_EQ(pack_ndarray_payload(t), want);
  EXPECT_EQ(unpack_ndarray_payload(want, "x"), t);
}

TEST(MsgpackCheckpoint, RootLayoutIsVersion3Optimizer) {
  FlatState s;
  s["state/step"] = HostTensor::from_values<int32_t>("int32", {}, {5});
  auto bytes = encode_checkpoint_msgpack(s);
  // fixmap(2) "version" 3 "optimizer" {...}
  ASSERT_GT(bytes.size(), 20u);
  EXPECT_EQ(bytes[0], 0x82);
  EXPECT_EQ(std::string(bytes.begin() + 2, bytes.begin() + 9), "version");
  EXPECT_EQ(bytes[9], 0x03);
  EXPECT_EQ(std::string(bytes.begin() + 11, bytes.begin() + 20), "optimizer");
}

TEST(MsgpackCheckpoint, RoundTripAllLeafKinds) {
  FlatState s;
  std::vector<uint16_t> bf;
  for (float f : {1.5f, -2.25f, 3.0e-3f, 65504.f}) bf.push_back(bfloat16::from_float(f));
  bf.push_back(0x7fc1);  // a NaN payload must survive bit-exactly
  bf.push_back(0x0001);  // subnormal
  s["target/decoder/decoder_norm/scale"] = HostTensor::from_values<uint16_t>("bfloat16", {6}, bf);
  s["target/encoder/layers_0/attention/query/kernel"] = [] {
    TensorStoreSpec sp;
    sp.path = "target.encoder.layers_0.attention.query.kernel";
    sp.shape = {8, 12};
    sp.chunks = {4, 12};
    sp.compressor = {"zstd", 1};
    return sp;
  }();
  s["state/step"] = HostTensor::from_values<int32_t>("int32", {}, {1000});
  s["state/param_states/x/v_row"] = HostTensor::from_values<float>("float32", {3}, {1, 2, 3});
  s["flax_mutables"] = EmptyDict{};
  s["meta/int"] = int64_t(-7);
  s["meta/float"] = 0.25;
  s["meta/flag"] = true;
  s["meta/name"] = std::string("t5");
  s["meta/none"] = MsgpackNil{};
  auto bytes = encode_checkpoint_msgpack(s);
  DecodedCheckpoint d = decode_checkpoint_msgpack(bytes, "mem");
  EXPECT_EQ(d.version, 3);
  EXPECT_EQ(d.leaves, s);
}

TEST(MsgpackCheckpoint, LargeInlineArraysAreChunkedLikeFlax) {
  FlatState s;
  std::vector<float> v(10);
  for (int i = 0; i < 10; ++i) v[i] = float(i);
  s["target/big"] = HostTensor::from_values<float>("float32", {2, 5}, v);
  MsgpackWriteOptions opt;
  opt.max_inline_chunk_bytes = 16;  // 4 floats per chunk -> 3 chunks
  auto bytes = encode_checkpoint_msgpack(s, 3, opt);
  std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("__msgpack_chunked_array__"), std::string::npos);
  DecodedCheckpoint d = decode_checkpoint_msgpack(bytes, "mem");
  EXPECT_EQ(d.leaves.at("target/big"), s.at("target/big"));
}

TEST(MsgpackCheckpoint, SpecJsonIsTensorStoreToJson) {
  TensorStoreSpec sp;
  sp.path = "target.token_embedder.embedding";
  sp.shape = {32128, 768};
  sp.chunks = {16064, 768};
  EXPECT_EQ(sp.to_json().dump(),
            R"({"driver":"zarr","dtype":"float32","kvstore":{"driver":"file","path":"target.token_embedder.embedding/"},)"
            R"("metadata":{"chunks":[16064,768],"compressor":{"id":"gzip","level":1},"shape":[32128,768]}})");
  // Older layouts: path at the top level, gcs driver, no trailing slash.
  auto old = TensorStoreSpec::from_json(
      nlohmann::json::parse(R"({"driver":"zarr","kvstore":{"driver":"gcs","bucket":"t5x-dummy-bucket"},)"
                            R"("path":"target.a.b","metadata":{"shape":[2],"chunks":[2],"compressor":{"id":"gzip"}}})"),
      "x");
  EXPECT_EQ(old.path, "target.a.b");
  EXPECT_EQ(old.kvstore_driver, "gcs");
  EXPECT_EQ(old.compressor.level, 1);
  EXPECT_EQ(ts_dir_name("target/encoder/layers_0/mlp/wi_0/kernel"), "target.encoder.layers_0.mlp.wi_0.kernel");
}

TEST(MsgpackCheckpoint, CorruptAndTruncatedFilesAreReported) {
  FlatState s;
  s["target/w"] = HostTensor::from_values<float>("float32", {4}, {1, 2, 3, 4});
  auto bytes = encode_checkpoint_msgpack(s);
  auto cut = bytes;
  cut.resize(bytes.size() - 5);
  try {
    decode_checkpoint_msgpack(cut, "ckpt/checkpoint");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt/checkpoint"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("truncated or corrupt"), std::string::npos);
  }
  EXPECT_THROW(decode_checkpoint_msgpack({}, "empty"), CheckpointError);
  std::string tf = "model_checkpoint_path: \"model.ckpt-1\"";
  EXPECT_THROW(decode_checkpoint_msgpack({reinterpret_cast<const uint8_t*>(tf.data()), tf.size()}, "tf"),
               CheckpointError);
  // Inline array whose data length disagrees with its shape.
  auto bad = bytes;
  for (size_t i = 0; i + 1 < bad.size(); ++i)
    if (bad[i] == 0xc4 && bad[i + 1] == 16) { bad[i + 1] = 12; break; }
  EXPECT_THROW(decode_checkpoint_msgpack(bad, "bad"), CheckpointError);
}

// Found by fuzz/msgpack_fuzzer: the element count of a float32 (2^62, 4)
// wrapped to 0, so an inline array with no data bytes was accepted.
TEST(MsgpackCheckpoint, InlineArrayShapeThatOverflowsIsRejected) {
  // [[2^62, 4], "float32", b""]
  const std::vector<uint8_t> payload = {0x93, 0x92, 0xcf, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x04,
                                        0xa7, 'f', 'l', 'o', 'a', 't', '3', '2', 0xc4, 0x00};
  try {
    unpack_ndarray_payload(payload, "ckpt/checkpoint at 'target/w'");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()), "ckpt/checkpoint at 'target/w': inline array shape (4611686018427387904, 4) "
                                     "has a negative dimension or over 2^63 bytes");
  }
}

// Found by fuzz/msgpack_fuzzer: msgpack-c allocates what an array header
// claims before reading it; 2^32 - 1 elements in a 5-byte file asked for
// about 100 GiB. Counts are now bounded by the file's size.
TEST(MsgpackCheckpoint, ArrayHeaderLargerThanTheFileIsAnError) {
  const std::vector<uint8_t> b = {0x81, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff};  // {"a": array32(2^32 - 1)}
  try {
    decode_checkpoint_msgpack(b, "ckpt/checkpoint");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("ckpt/checkpoint: cannot parse msgpack (8 bytes): array size overflow", 0), 0u)
        << e.what();
  }
}

// Found by fuzz/msgpack_fuzzer: a TensorStore spec leaf with a non-string
// map key escaped as std::runtime_error("expected a string") and ended the
// program instead of naming the file and the leaf.
TEST(MsgpackCheckpoint, SpecWithNonStringKeyNamesTheLeaf) {
  auto str = [](std::vector<uint8_t>& b, const std::string& s) {
    b.push_back(uint8_t(0xa0 | s.size()));
    b.insert(b.end(), s.begin(), s.end());
  };
  // {"version": 3, "optimizer": {"target": {"w": {"driver": "zarr", "path": "target.w", 1: 1}}}}
  std::vector<uint8_t> b = {0x82};
  str(b, "version");
  b.push_back(0x03);
  str(b, "optimizer");
  b.push_back(0x81);
  str(b, "target");
  b.push_back(0x81);
  str(b, "w");
  b.push_back(0x83);
  str(b, "driver");
  str(b, "zarr");
  str(b, "path");
  str(b, "target.w");
  b.push_back(0x01);
  b.push_back(0x01);
  try {
    decode_checkpoint_msgpack(b, "ckpt/checkpoint");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()), "ckpt/checkpoint: malformed array at 'target/w' (expected a string)");
  }
}

TEST(MsgpackCheckpoint, PlainFlaxFileIsVersionZero) {
  FlatState s;
  s["params/w"] = HostTensor::from_values<float>("float32", {1}, {2});
  auto bytes = encode_checkpoint_msgpack(s, 0);
  auto d = decode_checkpoint_msgpack(bytes, "v0");
  EXPECT_EQ(d.version, 0);
  EXPECT_EQ(d.leaves, s);
}

}  // namespace
}  // namespace t5x
