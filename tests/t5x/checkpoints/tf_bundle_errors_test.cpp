// Bad TensorBundle indexes, each with its exact message (file, offset,
// tensor): slices that do not tile the shape, a missing slice entry, a
// malformed BundleEntryProto, an unsupported dtype, and bad header entries.
// The files are built here: by this library's writer, then, where the writer
// cannot produce the damage, by rewriting the index's key/value pairs with
// LevelDB's own table writer (uncompressed, so the one data block is at
// offset 0).
#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/table.h>
#include <leveldb/table_builder.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <unistd.h>

#include "core/dtype_bf16.h"
#include "t5x/checkpoints/meshtf_mapping.h"
#include "t5x/checkpoints/tf_bundle.h"
#include "error_of.h"

namespace t5x::tf {
namespace {

namespace fs = std::filesystem;

using testing_ckpt::error_of;

// shared/embedding [10,4] bf16 as the given row slices (one shard each), and
// two whole tensors.
std::vector<TfWriteTensor> tensors(const std::vector<std::pair<int64_t, int64_t>>& rows) {
  std::vector<TfWriteTensor> v;
  int shard = 0;
  for (auto [start, len] : rows) {
    TfWriteTensor t;
    t.name = "shared/embedding";
    std::vector<bfloat16> vals;
    for (int64_t i = 0; i < len * 4; ++i) vals.push_back(bfloat16(float(start * 4 + i)));
    t.data = HostTensor::from_values<bfloat16>("bfloat16", {len, 4}, vals);
    t.shard = shard++ % 2;
    t.full_shape = {10, 4};
    t.slice = {{start, len}, {0, -1}};
    v.push_back(t);
  }
  v.push_back({"encoder/rms_norm/scale", HostTensor::from_values<float>("float32", {4}, {1, 2, 3, 4}), 0, {}, {}});
  v.push_back({"decoder/block_000/layer_000/SelfAttention/q",
               HostTensor::from_values<int32_t>("int32", {2, 3}, {1, -2, 3, -4, 5, -6}), 1, {}, {}});
  return v;
}

// Reads PREFIX.index with LevelDB, lets `edit` change its key -> value map,
// and writes it back as one uncompressed table.
void rewrite_index(const std::string& prefix, const std::function<void(std::map<std::string, std::string>&)>& edit) {
  const std::string index = prefix + ".index";
  std::map<std::string, std::string> kv;
  {
    leveldb::RandomAccessFile* raw_file = nullptr;
    ASSERT_TRUE(leveldb::Env::Default()->NewRandomAccessFile(index, &raw_file).ok());
    std::unique_ptr<leveldb::RandomAccessFile> file(raw_file);
    leveldb::Table* raw_table = nullptr;
    ASSERT_TRUE(leveldb::Table::Open(leveldb::Options(), file.get(), fs::file_size(index), &raw_table).ok());
    std::unique_ptr<leveldb::Table> table(raw_table);
    std::unique_ptr<leveldb::Iterator> it(table->NewIterator(leveldb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) kv[it->key().ToString()] = it->value().ToString();
    ASSERT_TRUE(it->status().ok());
  }
  edit(kv);
  leveldb::Options lo;
  lo.compression = leveldb::kNoCompression;
  leveldb::WritableFile* raw_out = nullptr;
  ASSERT_TRUE(leveldb::Env::Default()->NewWritableFile(index, &raw_out).ok());
  std::unique_ptr<leveldb::WritableFile> out(raw_out);
  leveldb::TableBuilder tb(lo, out.get());
  for (const auto& [k, v] : kv) tb.Add(k, v);
  ASSERT_TRUE(tb.Finish().ok());
  ASSERT_TRUE(out->Close().ok());
}

class TfBundleErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() / ("t5x_tf_bundle_errors_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    p = dir + "/model.ckpt-7";
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string dir, p;
};

// ---- Sliced variables whose slices do not tile the full shape ----

TEST_F(TfBundleErrors, SlicesLeaveAGap) {
  write_tf_bundle(p, tensors({{0, 6}}));  // rows 6-9 are nowhere
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_EQ(error_of([&] { r.read("shared/embedding"); }),
            p + ".index: tensor 'shared/embedding' (index block at offset 0): its slices cover 24 of its 40 elements");
  EXPECT_EQ(*r.verify("shared/embedding"), error_of([&] { r.read("shared/embedding"); }));
  EXPECT_FALSE(r.verify("encoder/rms_norm/scale").has_value());
}

TEST_F(TfBundleErrors, SlicesOverlap) {
  // 6 + 4 rows make 10, as many as the shape, but rows 4-5 twice and 8-9 never.
  write_tf_bundle(p, tensors({{0, 6}, {4, 4}}));
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_EQ(error_of([&] { r.read("shared/embedding"); }),
            p + ".index: tensor 'shared/embedding' (index block at offset 0): slices [0:6, :] and [4:8, :] overlap");
}

TEST_F(TfBundleErrors, SliceOutsideTheShape) {
  write_tf_bundle(p, tensors({{0, 6}, {6, 6}}));
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_EQ(error_of([&] { r.read("shared/embedding"); }),
            p + ".index: tensor 'shared/embedding' (index block at offset 0): slice [6:12, :] lies outside its "
                "shape (10, 4)");
}

TEST_F(TfBundleErrors, SlicesThatTileRead) {
  write_tf_bundle(p, tensors({{6, 4}, {0, 6}}));
  HostTensor t = TfBundleReader::open(p).read("shared/embedding");
  for (int i = 0; i < 40; ++i) EXPECT_EQ(float(t.values<bfloat16>()[size_t(i)]), float(i));
}

TEST_F(TfBundleErrors, MissingSliceEntry) {
  write_tf_bundle(p, tensors({{0, 6}, {6, 4}}));
  rewrite_index(p, [](auto& kv) { ASSERT_EQ(kv.erase(slice_key("shared/embedding", {{6, 4}, {0, -1}})), 1u); });
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: tensor 'shared/embedding' (index block at offset 0): lists slice [6:10, :] but the index "
                "has no entry for it");
}

TEST_F(TfBundleErrors, SliceStoredWithAnotherShape) {
  write_tf_bundle(p, tensors({{0, 6}, {6, 4}}));
  // The entry of slice [6:10, :] says (5,4): a shape proto of dims 5 and 4.
  rewrite_index(p, [](auto& kv) {
    std::string& v = kv.at(slice_key("shared/embedding", {{6, 4}, {0, -1}}));
    ASSERT_EQ(v.substr(0, 10), std::string("\x08\x0e\x12\x08\x12\x02\x08\x04\x12\x02", 10));
    v[7] = 5;
  });
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_EQ(error_of([&] { r.read("shared/embedding"); }),
            p + ".index: tensor 'shared/embedding' slice [6:10, :] (index block at offset 0): stored as "
                "bfloat16(5, 4), expected bfloat16(4, 4)");
}

// ---- Malformed entries and dtypes ----

TEST_F(TfBundleErrors, MalformedBundleEntryProto) {
  write_tf_bundle(p, tensors({{0, 10}}));
  // dtype 1, then a shape field whose length (9) runs past the value's end.
  rewrite_index(p, [](auto& kv) { kv.at("encoder/rms_norm/scale") = std::string("\x08\x01\x12\x09\x12\x02\x08\x04", 8); });
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: tensor 'encoder/rms_norm/scale' (index block at offset 0): not a BundleEntryProto (8 bytes)");
  // A truncated crc32c (field 6, fixed32) in a slice entry.
  write_tf_bundle(p, tensors({{0, 10}}));
  rewrite_index(p, [](auto& kv) { kv.at(slice_key("shared/embedding", {{0, 10}, {0, -1}})) = std::string("\x35\x01\x02", 3); });
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: tensor 'shared/embedding' (a slice's entry) (index block at offset 0): not a BundleEntryProto "
                "(3 bytes)");
}

TEST_F(TfBundleErrors, UnsupportedDtype) {
  write_tf_bundle(p, tensors({{0, 10}}));
  // The float32 entry (dtype 1) relabelled as DT_STRING (7) and DT_COMPLEX64 (8).
  rewrite_index(p, [](auto& kv) {
    std::string& v = kv.at("encoder/rms_norm/scale");
    ASSERT_EQ(v.substr(0, 2), std::string("\x08\x01", 2));
    v[1] = 7;
    kv.at("decoder/block_000/layer_000/SelfAttention/q")[1] = 8;
  });
  TfBundleReader r = TfBundleReader::open(p);
  EXPECT_EQ(r.entry("encoder/rms_norm/scale").tf_dtype, 7);
  EXPECT_EQ(r.entry("encoder/rms_norm/scale").dtype, "");
  const std::string supported = " is not supported (float32, bfloat16, float16, float64, int8/16/32/64, uint8, uint16, bool)";
  EXPECT_EQ(error_of([&] { r.read("encoder/rms_norm/scale"); }),
            p + ".index: tensor 'encoder/rms_norm/scale' (index block at offset 0): TF dtype 7" + supported);
  EXPECT_EQ(error_of([&] { r.read("decoder/block_000/layer_000/SelfAttention/q"); }),
            p + ".index: tensor 'decoder/block_000/layer_000/SelfAttention/q' (index block at offset 0): TF dtype 8" +
                supported);
  // The import stops at the first such tensor it reads.
  EXPECT_EQ(error_of([&] { import_meshtf(r); }),
            p + ".index: tensor 'decoder/block_000/layer_000/SelfAttention/q' (index block at offset 0): TF dtype 8" +
                supported);
}

// Found by fuzz/tf_bundle_fuzzer: a shape whose byte size, or an offset
// whose end, overflows int64 was multiplied and added unchecked (a float32
// (2^62, 4) read as an empty tensor).
TEST_F(TfBundleErrors, SizesThatOverflowAreRejected) {
  write_tf_bundle(p, tensors({{0, 10}}));
  // dtype 1 (float32), shape {dim 2^62, dim 4}.
  const std::string huge_shape = std::string("\x08\x01\x12\x10\x12\x0a\x08", 7) + std::string(8, '\x80') +
                                 std::string("\x40\x12\x02\x08\x04", 5);
  rewrite_index(p, [&](auto& kv) { kv.at("encoder/rms_norm/scale") = huge_shape; });
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: tensor 'encoder/rms_norm/scale' (index block at offset 0): shape (4611686018427387904, 4) "
                "has a negative dimension or over 2^63 bytes");
  // float32 (4,) at offset 2^63 - 1, size 16.
  write_tf_bundle(p, tensors({{0, 10}}));
  const std::string far = std::string("\x08\x01\x12\x04\x12\x02\x08\x04\x20", 9) + std::string(8, '\xff') +
                          std::string("\x7f\x28\x10", 3);
  rewrite_index(p, [&](auto& kv) { kv.at("encoder/rms_norm/scale") = far; });
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: tensor 'encoder/rms_norm/scale' (index block at offset 0): offset 9223372036854775807 and "
                "size 16 are out of range");
}

// Found by fuzz/tf_bundle_fuzzer: leveldb allocates the size that the
// footer's index block handle states (no checksum covers it) before reading
// the block; a corrupt one asked for 31 GB. Now the footer is checked first.
TEST_F(TfBundleErrors, FooterHandleOutsideTheFile) {
  write_tf_bundle(p, tensors({{0, 10}}));
  const std::string index = p + ".index";
  std::string bytes;
  {
    std::ifstream in(index, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t end = bytes.size() - 48;
  // metaindex handle {0, 0}; index handle {0, 2^35}; padding; the magic number.
  std::string footer = std::string("\x00\x00\x00\x80\x80\x80\x80\x80\x01", 9);
  footer.resize(40, '\0');
  footer += std::string("\x57\xfb\x80\x8b\x24\x75\x47\xdb", 8);
  std::ofstream(index, std::ios::binary | std::ios::trunc) << bytes.substr(0, end) + footer;
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            index + ": corrupt footer at offset " + std::to_string(end) + ": the index block handle [0, +34359738368) "
            "lies outside the " + std::to_string(end) + " bytes before the footer\n  hint: the index is truncated or "
            "corrupt; copy the checkpoint again");
}

// ---- The header entry (key "") ----

TEST_F(TfBundleErrors, BigEndianHeader) {
  write_tf_bundle(p, tensors({{0, 10}}));
  // num_shards 2, endianness BIG (field 2 = 1), version {producer 1}.
  rewrite_index(p, [](auto& kv) { kv.at("") = std::string("\x08\x02\x10\x01\x1a\x02\x08\x01", 8); });
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: header entry (index block at offset 0): big-endian tensor data is not supported "
                "(endianness 1)");
}

TEST_F(TfBundleErrors, HeaderVersionShardsAndAbsence) {
  write_tf_bundle(p, tensors({{0, 10}}));
  rewrite_index(p, [](auto& kv) { kv.at("") = std::string("\x08\x02\x1a\x04\x08\x02\x10\x02", 8); });  // min_consumer 2
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: header entry (index block at offset 0): bundle version needs a reader of version >= 2 "
                "(this reads version 1)");
  rewrite_index(p, [](auto& kv) { kv.at("") = std::string("\x08\x01\x1a\x02\x08\x01", 6); });  // 1 shard
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: tensor 'decoder/block_000/layer_000/SelfAttention/q' (index block at offset 0): in shard 1 "
                "but the header says 1 shard(s)");
  rewrite_index(p, [](auto& kv) { kv.at("") = std::string("\x08\x02\x1a\x01", 4); });  // version cut short
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: header entry (index block at offset 0): not a BundleHeaderProto");
  rewrite_index(p, [](auto& kv) { kv.erase(""); });
  EXPECT_EQ(error_of([&] { TfBundleReader::open(p); }),
            p + ".index: no header entry (key \"\"); not a TensorBundle index");
}

}  // namespace
}  // namespace t5x::tf
