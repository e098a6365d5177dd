// The writer half of tf_bundle.h: BundleWriter + MergeBundles' output (data
// shards back to back, alignment 1) and the LevelDB-table index, snappy or
// not. The protobuf entries are encoded by hand, as tf_bundle.cpp decodes them
// (tf_bundle.proto is the schema).
#include <leveldb/env.h>
#include <leveldb/options.h>
#include <leveldb/table_builder.h>

#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>

#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/tf_bundle.h"

namespace t5x::tf {

namespace {

// Serialization follows protobuf's: fields in number order, proto3 zero
// scalars left out, a set oneof (Extent.length) always written.
void put_varint(std::string* o, uint64_t v) {
  while (v >= 0x80) {
    o->push_back(char(v | 0x80));
    v >>= 7;
  }
  o->push_back(char(v));
}
void put_tag(std::string* o, int field, int type) { put_varint(o, uint64_t(field) << 3 | uint64_t(type)); }
void put_int(std::string* o, int field, int64_t v) {
  if (v == 0) return;
  put_tag(o, field, 0);
  put_varint(o, uint64_t(v));
}
void put_bytes(std::string* o, int field, const std::string& b) {
  put_tag(o, field, 2);
  put_varint(o, b.size());
  *o += b;
}

std::string encode_entry(const TfEntry& e, bool with_location) {
  std::string o;
  put_int(&o, 1, e.tf_dtype);
  std::string shape;
  for (auto d : e.shape) {
    std::string dim;
    put_int(&dim, 1, d);
    put_bytes(&shape, 2, dim);
  }
  put_bytes(&o, 2, shape);  // TF always sets it: a scalar has an empty shape message
  if (with_location) {
    put_int(&o, 3, e.shard_id);
    put_int(&o, 4, e.offset);
    put_int(&o, 5, e.size);
    put_tag(&o, 6, 5);
    for (int i = 0; i < 4; ++i) o.push_back(char(e.masked_crc >> (8 * i)));
  }
  for (const auto& s : e.slices) {
    std::string sp;
    for (const auto& x : s) {
      std::string ext;
      if (x.length >= 0) {  // TensorSlice::AsProto leaves a full dimension empty
        put_int(&ext, 1, x.start);
        put_tag(&ext, 2, 0);
        put_varint(&ext, uint64_t(x.length));
      }
      put_bytes(&sp, 1, ext);
    }
    put_bytes(&o, 7, sp);
  }
  return o;
}

std::string encode_header(int num_shards) {
  std::string o, version;
  put_int(&o, 1, num_shards);
  put_int(&version, 1, 1);  // producer = kTensorBundleVersion
  put_bytes(&o, 3, version);
  return o;
}

}  // namespace

void write_tf_bundle(const std::string& prefix, const std::vector<TfWriteTensor>& tensors,
                     const TfWriteOptions& opt) {
  int num_shards = opt.num_shards;
  for (const auto& t : tensors) num_shards = std::max(num_shards, t.shard + 1);
  num_shards = std::max(num_shards, 1);
  std::vector<std::vector<uint8_t>> shard_bytes(static_cast<size_t>(num_shards));
  std::map<std::string, std::string> kv;  // std::string orders bytes as unsigned, as leveldb's bytewise
  std::map<std::string, TfEntry> full_entries;
  for (const auto& t : tensors) {
    const int dt = tf_dtype_number(t.data.dtype);
    if (dt == 0) throw std::invalid_argument("[write_tf_bundle] dtype " + t.data.dtype + " of '" + t.name + "'");
    if (t.shard < 0) throw std::invalid_argument("[write_tf_bundle] negative shard for '" + t.name + "'");
    auto& out = shard_bytes[size_t(t.shard)];
    TfEntry p;
    p.tf_dtype = dt;
    p.shape = t.data.shape;
    p.shard_id = t.shard;
    p.offset = int64_t(out.size());
    p.size = int64_t(t.data.data.size());
    p.masked_crc = crc_mask(crc32c(t.data.data.data(), t.data.data.size()));
    out.insert(out.end(), t.data.data.begin(), t.data.data.end());
    if (t.slice.empty()) {
      if (!kv.emplace(t.name, encode_entry(p, true)).second)
        throw std::invalid_argument("[write_tf_bundle] duplicate tensor '" + t.name + "'");
      continue;
    }
    if (t.slice.size() != t.full_shape.size())
      throw std::invalid_argument("[write_tf_bundle] slice rank of '" + t.name + "'");
    kv[slice_key(t.name, t.slice)] = encode_entry(p, true);
    auto& fe = full_entries[t.name];
    fe.tf_dtype = dt;
    fe.shape = t.full_shape;
    fe.slices.push_back(t.slice);
  }
  for (auto& [name, fe] : full_entries)
    if (!kv.emplace(name, encode_entry(fe, false)).second)
      throw std::invalid_argument("[write_tf_bundle] '" + name + "' is both whole and sliced");
  kv[""] = encode_header(num_shards);

  for (int s = 0; s < num_shards; ++s) {
    char b[40];
    std::snprintf(b, sizeof b, ".data-%05d-of-%05d", s, num_shards);
    fileio::write_file(prefix + b, shard_bytes[size_t(s)], false);
  }
  leveldb::Options lo;
  lo.compression = opt.snappy ? leveldb::kSnappyCompression : leveldb::kNoCompression;
  lo.block_size = size_t(opt.block_size);
  lo.block_restart_interval = opt.block_restart_interval;
  leveldb::WritableFile* wf = nullptr;
  const std::string index = prefix + ".index";
  leveldb::Status st = leveldb::Env::Default()->NewWritableFile(index, &wf);
  if (!st.ok()) throw CheckpointError(index + ": " + st.ToString());
  std::unique_ptr<leveldb::WritableFile> file(wf);
  leveldb::TableBuilder tb(lo, file.get());
  for (const auto& [k, v] : kv) tb.Add(k, v);
  st = tb.Finish();
  if (st.ok()) st = file->Sync();
  if (st.ok()) st = file->Close();
  if (!st.ok()) throw CheckpointError(index + ": " + st.ToString());
}

}  // namespace t5x::tf
