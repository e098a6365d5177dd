// Save / restore throughput of the t5x checkpoint writer for a T5.1.1-sized
// parameter set (shapes from t5x/examples/t5 network.py; t5x.md §4).
//
//   checkpoint_bench [--size base|small|tiny] [--codecs gzip,zstd,raw]
//                    [--threads N] [--dir DIR] [--no-fsync]
//
// For each codec: one save (single process, t5x's 64 MiB chunk rule, msgpack
// and manifest last, rename, fsync), one check of the manifest's sizes and
// CRCs (what `t5x train` does before it resumes) and one full restore of
// every array. MB/s counts the uncompressed float32 bytes (1 MB = 1e6 bytes).
// Prints one line per codec.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"

using namespace t5x;

namespace {

struct Size { int64_t vocab, emb, heads, head_dim, mlp, layers; };

std::vector<std::pair<std::string, std::vector<int64_t>>> t5_1_1_shapes(const Size& s) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> p;
  const int64_t inner = s.heads * s.head_dim;
  p.push_back({"token_embedder/embedding", {s.vocab, s.emb}});
  p.push_back({"encoder/relpos_bias/rel_embedding", {s.heads, 32}});
  p.push_back({"decoder/relpos_bias/rel_embedding", {s.heads, 32}});
  auto attn = [&](const std::string& pre) {
    for (auto n : {"query", "key", "value"}) p.push_back({pre + "/" + n + "/kernel", {s.emb, inner}});
    p.push_back({pre + "/out/kernel", {inner, s.emb}});
  };
  auto mlp = [&](const std::string& pre) {
    p.push_back({pre + "/wi_0/kernel", {s.emb, s.mlp}});
    p.push_back({pre + "/wi_1/kernel", {s.emb, s.mlp}});
    p.push_back({pre + "/wo/kernel", {s.mlp, s.emb}});
  };
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string l = "encoder/layers_" + std::to_string(i);
    p.push_back({l + "/pre_attention_layer_norm/scale", {s.emb}});
    attn(l + "/attention");
    p.push_back({l + "/pre_mlp_layer_norm/scale", {s.emb}});
    mlp(l + "/mlp");
  }
  p.push_back({"encoder/encoder_norm/scale", {s.emb}});
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string l = "decoder/layers_" + std::to_string(i);
    p.push_back({l + "/pre_self_attention_layer_norm/scale", {s.emb}});
    attn(l + "/self_attention");
    p.push_back({l + "/pre_cross_attention_layer_norm/scale", {s.emb}});
    attn(l + "/encoder_decoder_attention");
    p.push_back({l + "/pre_mlp_layer_norm/scale", {s.emb}});
    mlp(l + "/mlp");
  }
  p.push_back({"decoder/decoder_norm/scale", {s.emb}});
  p.push_back({"decoder/logits_dense/kernel", {s.emb, s.vocab}});
  return p;
}

double secs_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string size = "base", codecs = "gzip,zstd,raw", dir;
  int threads = 2;
  bool durable = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--size") size = next();
    else if (a == "--codecs") codecs = next();
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--dir") dir = next();
    else if (a == "--no-fsync") durable = false;
    else { std::fprintf(stderr, "unknown flag %s\n", a.c_str()); return 2; }
  }
  Size s = size == "base"    ? Size{32128, 768, 12, 64, 2048, 12}
           : size == "small" ? Size{32128, 512, 6, 64, 1024, 8}
                             : Size{32128, 8, 4, 3, 16, 2};
  if (dir.empty()) dir = (std::filesystem::temp_directory_path() / "t5x_checkpoint_bench").string();

  // Normal(0, 0.05) values: trained weights compress about as poorly.
  auto shapes = t5_1_1_shapes(s);
  std::vector<SaveLeaf> leaves;
  std::mt19937 rng(0);
  std::normal_distribution<float> nd(0.f, 0.05f);
  uint64_t nparams = 0;
  for (const auto& [name, shape] : shapes) {
    HostTensor t = HostTensor::zeros("float32", shape);
    float* d = reinterpret_cast<float*>(t.data.data());
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = nd(rng);
    nparams += uint64_t(t.numel());
    SaveLeaf l = SaveLeaf::sharded("target/" + name, std::move(t), shape, IndexBox::full(shape));
    l.chunks = t5x_chunk_shape(shape, 4);
    leaves.push_back(std::move(l));
  }
  leaves.push_back(SaveLeaf::inline_array("state/step", HostTensor::from_values<int32_t>("int32", {}, {1})));
  const double mb = double(nparams) * 4 / 1e6;
  std::printf("T5.1.1-%s: %zu arrays, %.1fM params, %.1f MB float32, threads=%d, fsync=%d\n", size.c_str(),
              shapes.size(), double(nparams) / 1e6, mb, threads, int(durable));

  std::string rest = codecs;
  while (!rest.empty()) {
    std::string codec = rest.substr(0, rest.find(','));
    rest = rest.find(',') == std::string::npos ? "" : rest.substr(rest.find(',') + 1);
    fileio::remove_all(dir);
    fileio::make_dirs(dir);
    SaveOptions opt;
    opt.compressor = codec == "raw" ? ZarrCompressor{} : ZarrCompressor{codec, 1};
    opt.num_threads = threads;
    opt.durable = durable;
    auto t0 = std::chrono::steady_clock::now();
    SaveResult r = save_checkpoint(dir, 1, leaves, opt);
    const double ts = secs_since(t0);
    // What `t5x train` does before it resumes: sizes and CRC-32C of every
    // file against manifest.t5xcpp.json (validate_checkpoint, kChecksums).
    t0 = std::chrono::steady_clock::now();
    if (auto bad = validate_checkpoint(r.dir, Verify::kChecksums, threads)) {
      std::fprintf(stderr, "verify failed: %s\n", bad->c_str());
      return 1;
    }
    const double tv = secs_since(t0);
    t0 = std::chrono::steady_clock::now();
    CheckpointReader reader = CheckpointReader::open(r.dir);
    uint64_t checksum = 0;
    for (const auto& p : reader.array_paths()) {
      HostTensor t = reader.read(p, std::nullopt, "", threads);
      checksum += t.data.empty() ? 0 : t.data[t.data.size() / 2];
    }
    const double tr = secs_since(t0);
    std::printf("%-5s save %7.1f MB/s (%6.2f s, %7.1f MB on disk, ratio %.3f)  verify %7.1f MB/s (%5.2f s)  "
                "restore %7.1f MB/s (%6.2f s)  [%llu]\n",
                codec.c_str(), mb / ts, ts, double(r.bytes_written) / 1e6, double(r.bytes_written) / 1e6 / mb,
                mb / tv, tv, mb / tr, tr, (unsigned long long)checksum);
    std::fflush(stdout);
  }
  fileio::remove_all(dir);
  return 0;
}
