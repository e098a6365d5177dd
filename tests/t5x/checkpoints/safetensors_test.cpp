#include "t5x/checkpoints/safetensors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace t5x {
namespace {

std::vector<uint8_t> with_header(const std::string& header, size_t buffer_bytes) {
  std::vector<uint8_t> out(8 + header.size() + buffer_bytes, 0);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    decode_safetensors(bytes, "m.safetensors");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, RoundTripAllDtypes) {
  NamedTensors ts;
  ts.emplace_back("a.f32", HostTensor::from_values<float>("float32", {2, 2}, {1, 2, 3, 4}));
  ts.emplace_back("b.bf16", HostTensor::from_values<uint16_t>("bfloat16", {3}, {0x3f80, 0xc000, 0x7fc1}));
  ts.emplace_back("c.f16", HostTensor::from_values<uint16_t>("float16", {1}, {0x3c00}));
  ts.emplace_back("d.i32", HostTensor::from_values<int32_t>("int32", {2}, {-1, 7}));
  ts.emplace_back("e.i64", HostTensor::from_values<int64_t>("int64", {1, 1}, {1ll << 40}));
  ts.emplace_back("f.empty", HostTensor::zeros("float32", {0, 3}));
  auto bytes = encode_safetensors(ts, {{"format", "pt"}});
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[i]) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  auto header = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + n));
  EXPECT_EQ(header["b.bf16"]["dtype"], "BF16");
  EXPECT_EQ(header["a.f32"]["data_offsets"], nlohmann::json({0, 16}));
  SafetensorsFile f = decode_safetensors(bytes, "mem");
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), ts.size());
  for (const auto& [name, t] : ts) {
    ASSERT_NE(f.find(name), nullptr) << name;
    EXPECT_EQ(*f.find(name), t) << name;
  }
}

TEST(Safetensors, ValidationErrors) {
  EXPECT_NE(error_of({1, 2, 3}).find("too short"), std::string::npos);
  auto huge = with_header("{}", 0);
  huge[0] = 0xff;
  huge[5] = 0x01;
  EXPECT_NE(error_of(huge).find("header length"), std::string::npos);
  EXPECT_NE(error_of(with_header("[1]", 0)).find("does not start with '{'"), std::string::npos);
  EXPECT_NE(error_of(with_header("{\"a\":", 0)).find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_of(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4))
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))
                .find("expected 12"),
            std::string::npos);
  std::string overlap = error_of(with_header(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8));
  EXPECT_NE(overlap.find("overlaps"), std::string::npos) << overlap;
  EXPECT_NE(error_of(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)).find("gap"),
            std::string::npos);
  EXPECT_NE(error_of(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8)).find("unused"),
            std::string::npos);
  EXPECT_NE(error_of(with_header(R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", 8)).find("C64"),
            std::string::npos);
  EXPECT_EQ(error_of(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4)), "");
  // Found by fuzz/safetensors_fuzzer: (2^62, 4) float32 is 2^66 bytes, which
  // wrapped to 0 and matched an empty range.
  EXPECT_EQ(error_of(with_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", 0)),
            "m.safetensors: tensor 'a': shape (4611686018427387904, 4) has a negative dimension or over 2^63 bytes");
  EXPECT_NE(error_of(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0))
                .find("negative dimension"),
            std::string::npos);
  NamedTensors dup;
  dup.emplace_back("x", HostTensor::zeros("float32", {1}));
  dup.emplace_back("x", HostTensor::zeros("float32", {1}));
  EXPECT_THROW(encode_safetensors(dup), std::invalid_argument);
}

}  // namespace
}  // namespace t5x
