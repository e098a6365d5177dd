#include "t5x/checkpoints/zarr.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/dtype_bf16.h"
#include "t5x/checkpoints/file_io.h"
#include "error_of.h"
#include "../../common/tmpdir.h"

namespace t5x {
namespace {

namespace fs = std::filesystem;

using t5x_test::tmpdir;

HostTensor random_tensor(const std::string& dtype, std::vector<int64_t> shape, uint32_t seed) {
  HostTensor t = HostTensor::zeros(dtype, std::move(shape));
  std::mt19937 rng(seed);
  for (auto& b : t.data) b = uint8_t(rng());
  if (dtype == "bool") for (auto& b : t.data) b &= 1;
  return t;
}

// Reference slice of a full tensor (plain loops, independent of copy_box).
HostTensor slice_ref(const HostTensor& t, const IndexBox& b) {
  HostTensor o = HostTensor::zeros(t.dtype, b.extent());
  const size_t isz = dtype_itemsize(t.dtype);
  const auto& s = t.shape;
  auto e = b.extent();
  int64_t k = 0;
  for (int64_t i = 0; i < e[0]; ++i)
    for (int64_t j = 0; j < e[1]; ++j, ++k)
      std::memcpy(o.data.data() + k * isz,
                  t.data.data() + ((b.start[0] + i) * s[1] + b.start[1] + j) * isz, isz);
  return o;
}

TEST(ZarrMetadata, JsonMatchesTensorStoreText) {
  ZarrMetadata m;
  m.shape = {4, 6};
  m.chunks = {2, 3};
  m.dtype = "bfloat16";
  // Text written by tensorstore 0.1.86 for this spec (see scripts/golden/ckpt_make_t5x_layout.py).
  EXPECT_EQ(m.to_json(),
            R"({"chunks":[2,3],"compressor":{"id":"gzip","level":1},"dimension_separator":".",)"
            R"("dtype":"bfloat16","fill_value":null,"filters":null,"order":"C","shape":[4,6],"zarr_format":2})");
  m.dtype = "float32";
  m.compressor = {};
  EXPECT_NE(m.to_json().find(R"("compressor":null)"), std::string::npos);
  EXPECT_NE(m.to_json().find(R"("dtype":"<f4")"), std::string::npos);
  ZarrMetadata back = ZarrMetadata::from_json(m.to_json(), "x");
  EXPECT_EQ(back.shape, m.shape);
  EXPECT_EQ(back.chunks, m.chunks);
  EXPECT_EQ(back.dtype, "float32");
  EXPECT_TRUE(back.compressor.id.empty());
}

TEST(ZarrMetadata, RejectsBadFiles) {
  EXPECT_THROW(ZarrMetadata::from_json("{\"zarr_format\":2", "f/.zarray"), CheckpointError);
  EXPECT_THROW(ZarrMetadata::from_json(
                   R"({"zarr_format":3,"shape":[1],"chunks":[1],"dtype":"<f4","compressor":null})", "f"),
               CheckpointError);
  try {
    ZarrMetadata::from_json(R"({"zarr_format":2,"shape":[1],"chunks":[1],"dtype":"<c8","compressor":null})",
                            "dir/.zarray");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("dir/.zarray"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("<c8"), std::string::npos);
  }
}

// Found by fuzz/zarr_fuzzer: a shape of 2^66 bytes (its products wrapped),
// and a dimension_separator that put chunk files outside the array's
// directory ("0/../../x0").
TEST(ZarrMetadata, RejectsOverflowingShapesAndOtherSeparators) {
  const std::string huge = R"({"zarr_format":2,"shape":[4611686018427387904],"chunks":[1],"dtype":"<f4","compressor":null})";
  EXPECT_EQ(testing_ckpt::error_of([&] { ZarrMetadata::from_json(huge, "a/.zarray"); }),
            "a/.zarray: shape or chunks of over 2^63 bytes");
  const std::string sep =
      R"({"zarr_format":2,"shape":[2,2],"chunks":[1,1],"dtype":"<f4","compressor":null,"dimension_separator":"/../../x"})";
  EXPECT_EQ(testing_ckpt::error_of([&] { ZarrMetadata::from_json(sep, "a/.zarray"); }),
            "a/.zarray: dimension_separator \"/../../x\" is not \".\" or \"/\"");
  const auto slash = ZarrMetadata::from_json(
      R"({"zarr_format":2,"shape":[2,2],"chunks":[1,1],"dtype":"<f4","compressor":null,"dimension_separator":"/"})", "b");
  EXPECT_EQ(slash.chunk_key({1, 0}), "1/0");
  // The largest shape (2^63 - 1 elements of 1 byte) has a grid; its old
  // formula overflowed.
  const auto big = ZarrMetadata::from_json(
      R"({"zarr_format":2,"shape":[9223372036854775807],"chunks":[2],"dtype":"|u1","compressor":null})", "c");
  EXPECT_EQ(big.grid_shape(), std::vector<int64_t>{4611686018427387904});
  // A float dimension (the fuzzer's 6.7e44) was cast to int64: undefined.
  const std::string msg = testing_ckpt::error_of([] {
    ZarrMetadata::from_json(R"({"zarr_format":2,"shape":[6.5e44,12],"chunks":[8,6],"dtype":"<f2","compressor":null})",
                            "d/.zarray");
  });
  EXPECT_EQ(msg.rfind("d/.zarray: malformed .zarray: \"shape\": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("expected an integer of at most 2^63 - 1, got 6.5e+44"), std::string::npos) << msg;
  // A wrongly typed field is named, without the JSON library's tag.
  const std::string typed = testing_ckpt::error_of([] {
    ZarrMetadata::from_json(R"({"zarr_format":2,"shape":[4],"chunks":[4],"dtype":7,"compressor":null})", "e/.zarray");
  });
  EXPECT_EQ(typed.rfind("e/.zarray: malformed .zarray: \"dtype\": type must be string, but is number", 0), 0u)
      << typed;
  EXPECT_EQ(typed.find("json.exception"), std::string::npos) << typed;
  // A chunk far larger than its array is refused before anything is allocated
  // (a 4.8 GB chunk for a [8, 12] array was allocated and decoded).
  EXPECT_EQ(testing_ckpt::error_of([] {
              ZarrMetadata::from_json(
                  R"({"zarr_format":2,"shape":[8,12],"chunks":[100000000,12],"dtype":"<f4","compressor":null})",
                  "f/.zarray");
            }),
            "f/.zarray: chunks [100000000,12] make a chunk of 4800000000 bytes, more than the whole array [8,12] "
            "(384 bytes); the .zarray is damaged");
  // A chunk past a small array's edge is still valid zarr.
  EXPECT_EQ(ZarrMetadata::from_json(R"({"zarr_format":2,"shape":[5],"chunks":[10],"dtype":"<f4","compressor":null})",
                                    "g")
                .chunks,
            std::vector<int64_t>{10});
}

TEST(Zarr, ChunkShapeFollowsT5xRule) {
  // 64 MiB of f32 = 16M elements; [32128, 768] = 24.7M -> halve the largest dim's divisor.
  auto c = t5x_chunk_shape({32128, 768}, 4);
  EXPECT_EQ(c, (std::vector<int64_t>{16064, 768}));
  EXPECT_EQ(t5x_chunk_shape({768, 2048}, 4), (std::vector<int64_t>{768, 2048}));
  EXPECT_EQ(t5x_chunk_shape({12, 10}, 4, 40), (std::vector<int64_t>{4, 2}));  // 12x10 -> 6x10 -> 6x5 -> 4x5 -> 4x2
  EXPECT_EQ(t5x_chunk_shape({}, 4), std::vector<int64_t>{});
}

class ZarrRoundTrip : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ZarrRoundTrip, AllDtypesAndCodecs) {
  auto [dtype, codec] = GetParam();
  const std::string dir = tmpdir("rt_" + dtype + "_" + codec) + "/arr";
  ZarrMetadata m;
  m.shape = {5, 7};
  m.chunks = {2, 3};  // ragged edge chunks
  m.dtype = dtype;
  m.compressor = codec == "raw" ? ZarrCompressor{} : ZarrCompressor{codec, 1};
  HostTensor t = random_tensor(dtype, m.shape, 7);
  zarr_write_metadata(dir, m, false);
  zarr_write_box(dir, m, t, IndexBox::full(m.shape), {false, 2});
  HostTensor back = zarr_read(dir);
  EXPECT_EQ(back.dtype, dtype);
  EXPECT_EQ(back.shape, m.shape);
  EXPECT_TRUE(back.data == t.data);  // bit-exact, bf16 included
  // 3 x 3 chunk grid
  EXPECT_TRUE(fs::exists(dir + "/2.2"));
  EXPECT_FALSE(fs::exists(dir + "/3.0"));
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, ZarrRoundTrip,
    ::testing::Combine(::testing::Values("float32", "bfloat16", "float16", "int32", "int64",
                                         "uint8", "bool", "float64"),
                       ::testing::Values("gzip", "zstd", "raw", "zlib")),
    [](const auto& i) { return std::get<0>(i.param) + "_" + std::get<1>(i.param); });

TEST(Zarr, ScalarArrayUsesChunkKeyZero) {
  const std::string dir = tmpdir("scalar") + "/s";
  ZarrMetadata m;
  m.dtype = "int32";
  HostTensor t = HostTensor::from_values<int32_t>("int32", {}, {42});
  zarr_write_metadata(dir, m, false);
  zarr_write_box(dir, m, t, IndexBox::full({}), {false, 1});
  EXPECT_TRUE(fs::exists(dir + "/0"));
  EXPECT_EQ(zarr_read(dir).values<int32_t>()[0], 42);
}

TEST(Zarr, ShardedWritesThenSlicedReadsFromOtherChunking) {
  const std::string dir = tmpdir("sharded") + "/kernel";
  HostTensor full = random_tensor("float32", {8, 12}, 3);
  ZarrMetadata m;
  m.shape = {8, 12};
  m.chunks = {4, 6};  // per-shard chunks for a 2x2 mesh
  m.compressor = {"zstd", 1};
  zarr_write_metadata(dir, m, false);
  // Four "processes" each write only their quarter.
  for (int p = 0; p < 4; ++p) {
    IndexBox b{{(p / 2) * 4, (p % 2) * 6}, {(p / 2) * 4 + 4, (p % 2) * 6 + 6}};
    zarr_write_box(dir, m, slice_ref(full, b), b, {false, 1});
  }
  EXPECT_EQ(zarr_read(dir).data, full.data);
  // A reader on a (1x3) mesh reads its column slices - not aligned to chunks.
  ZarrMetadata rm = zarr_read_metadata(dir);
  for (int p = 0; p < 3; ++p) {
    IndexBox b{{0, p * 4}, {8, p * 4 + 4}};
    EXPECT_EQ(zarr_read_box(dir, rm, b).data, slice_ref(full, b).data) << p;
  }
  IndexBox odd{{3, 5}, {7, 11}};
  EXPECT_EQ(zarr_read_box(dir, rm, odd, 2).data, slice_ref(full, odd).data);
}

TEST(Zarr, MissingChunkReadsAsFillValue) {
  const std::string dir = tmpdir("missing") + "/a";
  ZarrMetadata m;
  m.shape = {4, 4};
  m.chunks = {2, 4};
  zarr_write_metadata(dir, m, false);
  HostTensor top = HostTensor::from_values<float>("float32", {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  zarr_write_box(dir, m, top, IndexBox{{0, 0}, {2, 4}}, {false, 1});
  auto v = zarr_read(dir).values<float>();
  EXPECT_EQ(v[7], 8.f);
  EXPECT_EQ(v[8], 0.f);  // fill_value null -> 0
  m.fill_value = 2.5;
  zarr_write_metadata(dir, m, false);
  EXPECT_EQ(zarr_read(dir).values<float>()[15], 2.5f);
}

TEST(Zarr, UnalignedWriteIsRejected) {
  const std::string dir = tmpdir("unaligned") + "/a";
  ZarrMetadata m;
  m.shape = {4, 4};
  m.chunks = {2, 2};
  HostTensor t = HostTensor::zeros("float32", {3, 4});
  EXPECT_THROW(zarr_write_box(dir, m, t, IndexBox{{0, 0}, {3, 4}}), std::invalid_argument);
}

TEST(Zarr, TruncatedAndCorruptChunksNameTheFile) {
  for (std::string codec : {"gzip", "zstd", "raw"}) {
    const std::string dir = tmpdir("trunc_" + codec) + "/a";
    ZarrMetadata m;
    m.shape = {64, 64};
    m.chunks = {32, 64};
    m.compressor = codec == "raw" ? ZarrCompressor{} : ZarrCompressor{codec, 1};
    HostTensor t = random_tensor("float32", m.shape, 11);
    zarr_write_metadata(dir, m, false);
    zarr_write_box(dir, m, t, IndexBox::full(m.shape), {false, 1});
    const std::string chunk = dir + "/1.0";
    auto bytes = fileio::read_file(chunk);
    bytes.resize(bytes.size() / 2);
    fileio::write_file(chunk, bytes, false);
    try {
      zarr_read(dir);
      FAIL() << codec;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(chunk), std::string::npos) << e.what();
    }
    EXPECT_FALSE(quick_check_chunk(m.compressor, bytes, m.chunk_nbytes()).empty()) << codec;
    // Rows of the intact chunk still read fine.
    EXPECT_NO_THROW(zarr_read_box(dir, zarr_read_metadata(dir), IndexBox{{0, 0}, {32, 64}}));
  }
}

TEST(Zarr, ReadsBigEndianFiles) {
  const std::string dir = tmpdir("be") + "/a";
  fs::create_directories(dir);
  fileio::write_text(dir + "/.zarray",
                     R"({"chunks":[2],"compressor":null,"dtype":">i4","fill_value":0,"filters":null,"order":"C","shape":[2],"zarr_format":2})",
                     false);
  std::vector<uint8_t> raw = {0, 0, 0, 1, 0, 0, 1, 0};
  fileio::write_file(dir + "/0", raw, false);
  auto v = zarr_read(dir).values<int32_t>();
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], 256);
}

}  // namespace
}  // namespace t5x
