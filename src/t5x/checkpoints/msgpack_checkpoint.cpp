#include "t5x/checkpoints/msgpack_checkpoint.h"
#include "t5x/checkpoints/json_int.h"

#include <msgpack.hpp>

#include <algorithm>
#include <sstream>

namespace t5x {

using json = nlohmann::json;

namespace {

constexpr int8_t kExtNdarray = 1;   // flax _MsgpackExtType.ndarray
constexpr int8_t kExtNative = 2;    // complex
constexpr int8_t kExtNpScalar = 3;  // numpy scalar (same payload as ndarray)

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& p, const std::string& s) {
  p.pack_str(uint32_t(s.size()));
  p.pack_str_body(s.data(), uint32_t(s.size()));
}

void pack_json(Packer& p, const json& j) {
  switch (j.type()) {
    case json::value_t::object:
      p.pack_map(uint32_t(j.size()));
      for (auto it = j.begin(); it != j.end(); ++it) { pack_str(p, it.key()); pack_json(p, it.value()); }
      break;
    case json::value_t::array:
      p.pack_array(uint32_t(j.size()));
      for (const auto& v : j) pack_json(p, v);
      break;
    case json::value_t::string: pack_str(p, j.get<std::string>()); break;
    case json::value_t::boolean: j.get<bool>() ? p.pack_true() : p.pack_false(); break;
    case json::value_t::number_unsigned: p.pack(j.get<uint64_t>()); break;
    case json::value_t::number_integer: p.pack(j.get<int64_t>()); break;
    case json::value_t::number_float: p.pack_double(j.get<double>()); break;
    default: p.pack_nil(); break;
  }
}

std::string obj_string(const msgpack::object& o) {
  if (o.type == msgpack::type::STR) return std::string(o.via.str.ptr, o.via.str.size);
  if (o.type == msgpack::type::BIN) return std::string(o.via.bin.ptr, o.via.bin.size);
  throw std::runtime_error("expected a string");
}

json to_json(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::MAP: {
      json j = json::object();
      for (uint32_t i = 0; i < o.via.map.size; ++i)
        j[obj_string(o.via.map.ptr[i].key)] = to_json(o.via.map.ptr[i].val);
      return j;
    }
    case msgpack::type::ARRAY: {
      json j = json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i) j.push_back(to_json(o.via.array.ptr[i]));
      return j;
    }
    case msgpack::type::STR: case msgpack::type::BIN: return obj_string(o);
    case msgpack::type::POSITIVE_INTEGER: return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER: return o.via.i64;
    case msgpack::type::FLOAT32: case msgpack::type::FLOAT64: return o.via.f64;
    case msgpack::type::BOOLEAN: return o.via.boolean;
    default: return nullptr;
  }
}

const msgpack::object* map_get(const msgpack::object& m, const char* key) {
  if (m.type != msgpack::type::MAP) return nullptr;
  for (uint32_t i = 0; i < m.via.map.size; ++i) {
    const auto& k = m.via.map.ptr[i].key;
    if ((k.type == msgpack::type::STR || k.type == msgpack::type::BIN) && obj_string(k) == key)
      return &m.via.map.ptr[i].val;
  }
  return nullptr;
}

// msgpack-c allocates the element count an array or map header states
// before it reads the elements. Each element takes at least a byte (a map
// entry two), so counts are bounded by the bytes there are: a corrupt header
// fails instead of allocating gigabytes. Flax trees are a few levels deep;
// the depth bound keeps the recursive decoding below off the stack's end.
msgpack::object_handle unpack_bounded(std::span<const uint8_t> b, std::size_t& off) {
  const std::size_t n = b.size();
  return msgpack::unpack(reinterpret_cast<const char*>(b.data()), n, off, nullptr, nullptr,
                         msgpack::unpack_limit(n, n / 2, n, n, n, /*depth=*/256));
}

bool looks_like_ts_spec(const msgpack::object& m) {
  const msgpack::object* d = map_get(m, "driver");
  return d && d->type == msgpack::type::STR && (map_get(m, "kvstore") || map_get(m, "path"));
}

struct Node {
  const CheckpointLeaf* leaf = nullptr;
  std::map<std::string, Node> children;
};

void pack_leaf(Packer& p, const CheckpointLeaf& leaf, const MsgpackWriteOptions& opt);

void pack_array_ext(Packer& p, const HostTensor& t) {
  auto payload = pack_ndarray_payload(t);
  p.pack_ext(payload.size(), kExtNdarray);
  p.pack_ext_body(reinterpret_cast<const char*>(payload.data()), uint32_t(payload.size()));
}

void pack_leaf(Packer& p, const CheckpointLeaf& leaf, const MsgpackWriteOptions& opt) {
  std::visit([&](const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, HostTensor>) {
      if (v.nbytes() <= opt.max_inline_chunk_bytes) { pack_array_ext(p, v); return; }
      // flax _chunk: flatten and split into MAX_CHUNK_SIZE / itemsize elements.
      const size_t isz = dtype_itemsize(v.dtype);
      const int64_t per = std::max<int64_t>(1, int64_t(opt.max_inline_chunk_bytes / isz));
      const int64_t n = v.numel();
      p.pack_map(3);
      pack_str(p, "__msgpack_chunked_array__"); p.pack_true();
      pack_str(p, "shape"); p.pack_map(uint32_t(v.shape.size()));
      for (size_t i = 0; i < v.shape.size(); ++i) { pack_str(p, std::to_string(i)); p.pack(v.shape[i]); }
      pack_str(p, "chunks");
      const int64_t nchunks = (n + per - 1) / per;
      p.pack_map(uint32_t(nchunks));
      for (int64_t c = 0; c < nchunks; ++c) {
        HostTensor part;
        part.dtype = v.dtype;
        const int64_t len = std::min(per, n - c * per);
        part.shape = {len};
        part.data.assign(v.data.begin() + c * per * isz, v.data.begin() + (c * per + len) * isz);
        pack_str(p, std::to_string(c));
        pack_array_ext(p, part);
      }
    } else if constexpr (std::is_same_v<T, TensorStoreSpec>) {
      pack_json(p, v.to_json());
    } else if constexpr (std::is_same_v<T, int64_t>) {
      p.pack(v);
    } else if constexpr (std::is_same_v<T, double>) {
      p.pack_double(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      v ? p.pack_true() : p.pack_false();
    } else if constexpr (std::is_same_v<T, std::string>) {
      pack_str(p, v);
    } else if constexpr (std::is_same_v<T, MsgpackNil>) {
      p.pack_nil();
    } else {
      p.pack_map(0);
    }
  }, leaf);
}

void pack_node(Packer& p, const Node& n, const MsgpackWriteOptions& opt) {
  if (n.leaf) { pack_leaf(p, *n.leaf, opt); return; }
  p.pack_map(uint32_t(n.children.size()));
  for (const auto& [k, c] : n.children) { pack_str(p, k); pack_node(p, c, opt); }
}

void decode_node(const msgpack::object& o, const std::string& path, FlatState& out,
                 const std::string& where, int version);

HostTensor decode_chunked(const msgpack::object& o, const std::string& path,
                          const std::string& where) {
  const msgpack::object* shape = map_get(o, "shape");
  const msgpack::object* chunks = map_get(o, "chunks");
  if (!shape || !chunks || chunks->type != msgpack::type::MAP)
    throw CheckpointError(where + ": chunked array at '" + path + "' lacks shape/chunks");
  HostTensor t;
  json js = to_json(*shape);
  if (js.is_object()) {
    for (size_t i = 0; i < js.size(); ++i) t.shape.push_back(json_int(js.at(std::to_string(i))));
  } else {
    t.shape = json_ints(js);
  }
  for (uint32_t i = 0; i < chunks->via.map.size; ++i) {
    const msgpack::object* c = map_get(*chunks, std::to_string(i).c_str());
    if (!c || c->type != msgpack::type::EXT)
      throw CheckpointError(where + ": chunked array at '" + path + "' misses chunk " + std::to_string(i));
    HostTensor part = unpack_ndarray_payload(
        {reinterpret_cast<const uint8_t*>(c->via.ext.data()), c->via.ext.size}, where + " at '" + path + "'");
    if (i == 0) t.dtype = part.dtype;
    t.data.insert(t.data.end(), part.data.begin(), part.data.end());
  }
  const auto want = checked_nbytes(t.shape, dtype_itemsize(t.dtype));
  if (!want || t.data.size() != *want)
    throw CheckpointError(where + ": chunked array at '" + path + "' has " +
                          std::to_string(t.data.size()) + " bytes for shape " + t.shape_string());
  return t;
}

void decode_node(const msgpack::object& o, const std::string& path, FlatState& out,
                 const std::string& where, int version) {
  const std::string here = path.empty() ? "<root>" : path;
  switch (o.type) {
    case msgpack::type::MAP: {
      if (o.via.map.size == 0) { out[path] = EmptyDict{}; return; }
      // Arrays stored as maps go through JSON: a malformed one (a non-string
      // key, a shape that is not a list of ints) names its path.
      auto named = [&](auto&& decode) {
        try {
          return decode();
        } catch (const CheckpointError&) {
          throw;
        } catch (const std::exception& e) {
          throw CheckpointError(where + ": malformed array at '" + here + "' (" + e.what() + ")");
        }
      };
      if (map_get(o, "__msgpack_chunked_array__")) {
        out[path] = named([&] { return decode_chunked(o, path, where); });
        return;
      }
      if (looks_like_ts_spec(o)) {
        TensorStoreSpec s = named([&] { return TensorStoreSpec::from_json(to_json(o), where + " at '" + path + "'"); });
        if (version < 3 && s.dtype == "uint16")
          throw CheckpointError(where + ": '" + path + "' is a version-" + std::to_string(version) +
                                " uint16 array (old bfloat16 encoding); update the checkpoint "
                                "to bfloat16 with t5x before restoring");
        out[path] = std::move(s);
        return;
      }
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        std::string key;
        try { key = obj_string(o.via.map.ptr[i].key); } catch (...) {
          throw CheckpointError(where + ": non-string key under '" + here + "'");
        }
        decode_node(o.via.map.ptr[i].val, path.empty() ? key : path + "/" + key, out, where, version);
      }
      return;
    }
    case msgpack::type::EXT: {
      int8_t ty = o.via.ext.type();
      if (ty == kExtNdarray || ty == kExtNpScalar) {
        out[path] = unpack_ndarray_payload(
            {reinterpret_cast<const uint8_t*>(o.via.ext.data()), o.via.ext.size},
            where + " at '" + path + "'");
        return;
      }
      throw CheckpointError(where + ": unsupported msgpack ext type " + std::to_string(ty) +
                            (ty == kExtNative ? " (complex)" : "") + " at '" + here + "'");
    }
    case msgpack::type::POSITIVE_INTEGER:
      out[path] = int64_t(o.via.u64); return;
    case msgpack::type::NEGATIVE_INTEGER: out[path] = int64_t(o.via.i64); return;
    case msgpack::type::FLOAT32: case msgpack::type::FLOAT64: out[path] = o.via.f64; return;
    case msgpack::type::BOOLEAN: out[path] = o.via.boolean; return;
    case msgpack::type::STR: case msgpack::type::BIN: out[path] = obj_string(o); return;
    case msgpack::type::NIL: out[path] = MsgpackNil{}; return;
    default:
      throw CheckpointError(where + ": unexpected msgpack array at '" + here +
                            "' (flax state dicts store lists as {\"0\": ...} maps)");
  }
}

}  // namespace

std::string ts_dir_name(const std::string& state_path) {
  std::string s = state_path;
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

json TensorStoreSpec::to_json() const {
  json kv = {{"driver", kvstore_driver}, {"path", path + "/"}};
  if (kvstore_driver == "gcs") kv["bucket"] = bucket;
  json comp = compressor.id.empty() ? json(nullptr)
                                    : json{{"id", compressor.id}, {"level", compressor.level}};
  return json{{"driver", driver},
              {"dtype", dtype},
              {"kvstore", kv},
              {"metadata", {{"chunks", chunks}, {"compressor", comp}, {"shape", shape}}}};
}

TensorStoreSpec TensorStoreSpec::from_json(const json& j, const std::string& where) {
  TensorStoreSpec s;
  try {
    s.driver = j.at("driver").get<std::string>();
    if (s.driver != "zarr")
      throw CheckpointError(where + ": TensorStore driver \"" + s.driver +
                            "\" is not supported (t5x writes \"zarr\")");
    if (j.contains("dtype")) s.dtype = j["dtype"].get<std::string>(), s.dtype_given = true;
    std::string p;
    if (j.contains("kvstore") && j["kvstore"].is_object()) {
      const json& kv = j["kvstore"];
      s.kvstore_driver = kv.value("driver", "file");
      p = kv.value("path", "");
      s.bucket = kv.value("bucket", "");
    } else if (j.contains("kvstore") && j["kvstore"].is_string()) {
      p = j["kvstore"].get<std::string>();
      auto pos = p.find("://");
      if (pos != std::string::npos) { s.kvstore_driver = p.substr(0, pos); p = p.substr(pos + 3); }
    }
    if (j.contains("path")) p = (p.empty() ? "" : p + "/") + j["path"].get<std::string>();
    while (!p.empty() && p.back() == '/') p.pop_back();
    s.path = p;
    if (j.contains("metadata")) {
      const json& m = j["metadata"];
      if (m.contains("shape")) s.shape = json_ints(m["shape"]);
      if (m.contains("chunks")) s.chunks = json_ints(m["chunks"]);
      if (m.contains("compressor")) {
        if (m["compressor"].is_null()) s.compressor = {};
        else s.compressor = {m["compressor"].at("id").get<std::string>(),
                             m["compressor"].value("level", 1)};
      }
    }
  } catch (const json::exception& e) {
    throw CheckpointError(where + ": malformed TensorStore spec " + j.dump() + " (" + e.what() + ")");
  }
  if (s.path.empty()) throw CheckpointError(where + ": TensorStore spec has no path: " + j.dump());
  return s;
}

std::vector<uint8_t> pack_ndarray_payload(const HostTensor& t) {
  if (t.data.size() != size_t(t.numel()) * dtype_itemsize(t.dtype))
    throw std::invalid_argument("[msgpack] tensor byte size does not match shape " + t.shape_string());
  msgpack::sbuffer buf;
  Packer p(buf);
  p.pack_array(3);
  p.pack_array(uint32_t(t.shape.size()));
  for (int64_t d : t.shape) p.pack(d);
  pack_str(p, t.dtype);
  p.pack_bin(uint32_t(t.data.size()));
  p.pack_bin_body(reinterpret_cast<const char*>(t.data.data()), uint32_t(t.data.size()));
  return std::vector<uint8_t>(buf.data(), buf.data() + buf.size());
}

HostTensor unpack_ndarray_payload(std::span<const uint8_t> payload, const std::string& where) {
  HostTensor t;
  try {
    std::size_t off = 0;
    msgpack::object_handle oh = unpack_bounded(payload, off);
    const msgpack::object& o = oh.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 3)
      throw CheckpointError(where + ": ndarray payload is not [shape, dtype, data]");
    const auto& sh = o.via.array.ptr[0];
    if (sh.type != msgpack::type::ARRAY) throw CheckpointError(where + ": ndarray shape is not a list");
    for (uint32_t i = 0; i < sh.via.array.size; ++i) t.shape.push_back(sh.via.array.ptr[i].as<int64_t>());
    t.dtype = obj_string(o.via.array.ptr[1]);
    if (!dtype_is_known(t.dtype))
      throw CheckpointError(where + ": unsupported inline array dtype '" + t.dtype + "'");
    const auto& d = o.via.array.ptr[2];
    if (d.type != msgpack::type::BIN && d.type != msgpack::type::STR)
      throw CheckpointError(where + ": ndarray data is not bytes");
    const char* ptr = d.type == msgpack::type::BIN ? d.via.bin.ptr : d.via.str.ptr;
    size_t n = d.type == msgpack::type::BIN ? d.via.bin.size : d.via.str.size;
    t.data.assign(ptr, ptr + n);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(where + ": corrupt inline ndarray (" + e.what() + ")");
  }
  const auto want = checked_nbytes(t.shape, dtype_itemsize(t.dtype));
  if (!want)
    throw CheckpointError(where + ": inline array shape " + t.shape_string() +
                          " has a negative dimension or over 2^63 bytes");
  if (t.data.size() != *want)
    throw CheckpointError(where + ": inline array " + t.dtype + t.shape_string() + " has " +
                          std::to_string(t.data.size()) + " data bytes, expected " + std::to_string(*want));
  return t;
}

std::vector<uint8_t> encode_checkpoint_msgpack(const FlatState& state, int version,
                                               const MsgpackWriteOptions& opt) {
  Node root;
  for (const auto& [path, leaf] : state) {
    Node* n = &root;
    std::stringstream ss(path);
    std::string part;
    while (std::getline(ss, part, '/')) {
      if (n->leaf) throw std::invalid_argument("[msgpack] path '" + path + "' lies under a leaf");
      n = &n->children[part];
    }
    if (!n->children.empty()) throw std::invalid_argument("[msgpack] leaf '" + path + "' has children");
    n->leaf = &leaf;
  }
  msgpack::sbuffer buf;
  Packer p(buf);
  if (version == 0) {
    pack_node(p, root, opt);
  } else {
    p.pack_map(2);
    pack_str(p, "version"); p.pack(version);
    pack_str(p, "optimizer"); pack_node(p, root, opt);
  }
  return std::vector<uint8_t>(buf.data(), buf.data() + buf.size());
}

DecodedCheckpoint decode_checkpoint_msgpack(std::span<const uint8_t> bytes, const std::string& where) {
  const std::string hint = "; the file is truncated or corrupt (was the save interrupted?) - "
                           "restore an earlier step";
  if (bytes.empty()) throw CheckpointError(where + ": empty checkpoint file" + hint);
  if (bytes.size() >= 21 && std::string(bytes.begin(), bytes.begin() + 21) == "model_checkpoint_path")
    throw CheckpointError(where + ": this is a TensorFlow checkpoint state file, not a t5x "
                          "msgpack checkpoint (import Mesh-TF checkpoints instead)");
  msgpack::object_handle oh;
  try {
    std::size_t off = 0;
    oh = unpack_bounded(bytes, off);
    if (off != bytes.size())
      throw CheckpointError(where + ": " + std::to_string(bytes.size() - off) +
                            " trailing bytes after the msgpack object at offset " +
                            std::to_string(off) + hint);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(where + ": cannot parse msgpack (" + std::to_string(bytes.size()) +
                          " bytes): " + e.what() + hint);
  }
  const msgpack::object& root = oh.get();
  if (root.type != msgpack::type::MAP)
    throw CheckpointError(where + ": top-level msgpack object is not a map" + hint);
  DecodedCheckpoint out;
  const msgpack::object* ver = map_get(root, "version");
  const msgpack::object* opt = map_get(root, "optimizer");
  if (ver && opt) {
    if (ver->type != msgpack::type::POSITIVE_INTEGER)
      throw CheckpointError(where + ": \"version\" is not an integer");
    out.version = int(ver->via.u64);
    if (out.version > 3)
      throw CheckpointError(where + ": checkpoint version " + std::to_string(out.version) +
                            " is newer than this reader (3)");
    if (opt->type != msgpack::type::MAP) throw CheckpointError(where + ": \"optimizer\" is not a map");
    decode_node(*opt, "", out.leaves, where, out.version);
  } else {
    out.version = 0;
    decode_node(root, "", out.leaves, where, 0);
  }
  return out;
}

}  // namespace t5x
