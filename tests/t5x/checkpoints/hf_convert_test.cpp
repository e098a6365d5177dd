#include "t5x/checkpoints/hf_convert.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <tuple>
#include <nlohmann/json.hpp>

#include "error_of.h"
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

// ---- import-hf / export-hf edge cases found by a tester ----

using testing_ckpt::error_of;

const HostTensor& find_t(const NamedTensors& v, const std::string& n) {
  for (const auto& [k, t] : v) if (k == n) return t;
  throw std::runtime_error("no tensor " + n);
}
void write_hf(const std::string& dir, const NamedTensors& t) {
  write_safetensors(dir + "/model.safetensors", t, {{"format", "pt"}});
}
void set_config(const std::string& dir, const std::string& key, const nlohmann::json& v) {
  auto cfg = nlohmann::json::parse(fileio::read_text(dir + "/config.json"));
  if (v.is_null()) cfg.erase(key); else cfg[key] = v;
  fileio::write_text(dir + "/config.json", cfg.dump(), false);
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// transformers 5's T5: lm_head is the file's lm_head.weight, else shared.weight;
// the decoder output is scaled by d_model^-0.5 iff scale_decoder_outputs
// (absent: tie_word_embeddings != false). t5x scales only tied logits.
TEST(HfConvert, ImportComputesTransformers5Logits) {
  const std::string base = tmpdir("logits");
  save_tiny(base + "/model", true, false);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  NamedTensors hf = read_safetensors(base + "/hf/model.safetensors").tensors;
  const HostTensor shared = find_t(hf, "shared.weight"), lm = find_t(hf, "lm_head.weight");
  NamedTensors no_lm;
  for (const auto& nt : hf) if (nt.first != "lm_head.weight") no_lm.push_back(nt);

  // As transformers 5 saves a T5.1.1 model: tie true, scale false, no lm_head.
  write_hf(base + "/hf", no_lm);
  set_config(base + "/hf", "tie_word_embeddings", true);
  set_config(base + "/hf", "scale_decoder_outputs", false);
  HfT5Config c;
  const std::string a = import_hf_t5(base + "/hf", base + "/a", {}, &c);
  EXPECT_FALSE(c.tie_word_embeddings);  // logits_via_embedding = False
  EXPECT_EQ(CheckpointReader::open(a).read("target/decoder/logits_dense/kernel"), transpose_2d(shared));

  // Scaled (tie true, no scale field) and no lm_head: t5x's tied logits.
  set_config(base + "/hf", "scale_decoder_outputs", nullptr);
  import_hf_t5(base + "/hf", base + "/b", {}, &c);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(CheckpointReader::open(base + "/b/checkpoint_0").has("target/decoder/logits_dense/kernel"));

  // Scaled with an lm_head of its own: t5x has no such model.
  write_hf(base + "/hf", hf);
  const std::string e = error_of([&] { import_hf_t5(base + "/hf", base + "/c"); });
  EXPECT_TRUE(has(e, "lm_head.weight differs from shared.weight but config.json scales the decoder output")) << e;
  EXPECT_FALSE(fs::exists(base + "/c"));

  // A transformers 4 T5.1.1 file: tie false, its own lm_head, unscaled.
  set_config(base + "/hf", "tie_word_embeddings", false);
  import_hf_t5(base + "/hf", base + "/d", {}, &c);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(CheckpointReader::open(base + "/d/checkpoint_0").read("target/decoder/logits_dense/kernel"), transpose_2d(lm));
}

TEST(HfConvert, ImportRefusesIncompleteOrContradictoryTensors) {
  const std::string base = tmpdir("names");
  save_tiny(base + "/model", true, false);  // gated, untied
  export_hf_t5(base + "/model/checkpoint_100", base + "/gated");
  save_tiny(base + "/relu_model", false, true);
  export_hf_t5(base + "/relu_model/checkpoint_100", base + "/relu");
  const NamedTensors gated = read_safetensors(base + "/gated/model.safetensors").tensors;
  int k = 0;
  auto import_without = [&](const std::string& dir, const NamedTensors& all, const std::string& drop,
                            const NamedTensors& add = {}) {
    NamedTensors t;
    for (const auto& nt : all) if (nt.first != drop) t.push_back(nt);
    for (const auto& nt : add) t.push_back(nt);
    write_hf(dir, t);
    const std::string out = base + "/out" + std::to_string(k++);
    const std::string e = error_of([&] { import_hf_t5(dir, out); });
    EXPECT_FALSE(fs::exists(out)) << out;
    write_hf(dir, all);
    return e;
  };
  for (const char* name : {"encoder.block.1.layer.1.DenseReluDense.wi_0.weight", "shared.weight",
                           "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}) {
    const std::string e = import_without(base + "/gated", gated, name);
    EXPECT_TRUE(has(e, "the tensors are not the model config.json describes\n  missing:\n    " + std::string(name)))
        << e;
  }
  EXPECT_TRUE(has(import_without(base + "/gated", gated, "encoder.block.1.layer.1.DenseReluDense.wi_0.weight"),
                  "config.json's feed_forward_proj is \"gated-gelu\" (gated: wi_0, wi_1 per MLP)"));
  const std::string extra = import_without(base + "/gated", gated, "", {{"encoder.extra.weight", find_t(gated, "shared.weight")}});
  EXPECT_TRUE(has(extra, "unexpected:\n    encoder.extra.weight")) << extra;
  // A table in block 1 of a T5 file is umT5's; a umT5 config needs one in every block.
  const std::string table0 = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
  const std::string umt5_like = import_without(
      base + "/gated", gated, "", {{"encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight", find_t(gated, table0)}});
  EXPECT_TRUE(has(umt5_like, "unexpected:\n    encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"))
      << umt5_like;
  EXPECT_TRUE(has(umt5_like, "a table in every block is umT5 (model_type \"umt5\")")) << umt5_like;
  set_config(base + "/gated", "model_type", "umt5");
  std::string u = error_of([&] { import_hf_t5(base + "/gated", base + "/u"); });
  EXPECT_TRUE(has(u, "missing:\n    decoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight")) << u;
  EXPECT_TRUE(has(u, "config.json says umT5 (model_type \"umt5\"): a relative_attention_bias in every block")) << u;
  set_config(base + "/gated", "model_type", "t5");
  EXPECT_FALSE(fs::exists(base + "/u"));
  // relu with wi_0/wi_1, and gated-gelu with one wi.
  set_config(base + "/gated", "feed_forward_proj", "relu");
  std::string e = error_of([&] { import_hf_t5(base + "/gated", base + "/r"); });
  EXPECT_TRUE(has(e, "missing:\n    decoder.block.0.layer.2.DenseReluDense.wi.weight")) << e;
  EXPECT_TRUE(has(e, "unexpected:\n    decoder.block.0.layer.2.DenseReluDense.wi_0.weight")) << e;
  EXPECT_TRUE(has(e, "feed_forward_proj is \"relu\" (not gated: one wi per MLP)")) << e;
  set_config(base + "/relu", "feed_forward_proj", "gated-gelu");
  e = error_of([&] { import_hf_t5(base + "/relu", base + "/g"); });
  EXPECT_TRUE(has(e, "missing:\n    decoder.block.0.layer.2.DenseReluDense.wi_0.weight")) << e;
  EXPECT_FALSE(fs::exists(base + "/r") || fs::exists(base + "/g"));
}

TEST(HfConvert, ImportCastsFloatsAndRefusesOtherDtypes) {
  const std::string base = tmpdir("dtypes");
  NamedTensors params = save_tiny(base + "/model", true, false);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  NamedTensors hf = read_safetensors(base + "/hf/model.safetensors").tensors;
  const std::string norm = "encoder.final_layer_norm.weight", q = "encoder.block.0.layer.0.SelfAttention.q.weight";
  const HostTensor f32 = find_t(hf, norm);
  // float64 and float16 files import as --dtype (default float32).
  NamedTensors mixed = hf;
  for (auto& [n, t] : mixed) {
    if (n == norm) {
      HostTensor d = HostTensor::zeros("float64", t.shape);
      for (int64_t i = 0; i < t.numel(); ++i)
        reinterpret_cast<double*>(d.data.data())[i] = reinterpret_cast<const float*>(t.data.data())[i];
      t = d;
    }
    if (n == q) t = cast_host_tensor(t, "float16");
  }
  write_hf(base + "/hf", mixed);
  CheckpointReader r = CheckpointReader::open(import_hf_t5(base + "/hf", base + "/a"));
  EXPECT_EQ(r.read("target/encoder/encoder_norm/scale"), f32);
  EXPECT_EQ(r.read("target/encoder/layers_0/attention/query/kernel"),
            cast_host_tensor(transpose_2d(cast_host_tensor(find_t(hf, q), "float16")), "float32"));
  HfImportOptions bf;
  bf.dtype = "bfloat16";
  CheckpointReader rb = CheckpointReader::open(import_hf_t5(base + "/hf", base + "/b", bf));
  for (const auto& p : rb.array_paths()) {
    if (p.rfind("target/", 0) == 0) {
      EXPECT_EQ(rb.info(p).dtype, "bfloat16") << p;
    }
  }
  // Integer / bool weights (a quantized model) are refused by name.
  for (const char* dt : {"int32", "int8", "bool"}) {
    NamedTensors bad = hf;
    for (auto& [n, t] : bad)
      if (n == norm) t = HostTensor::zeros(dt, t.shape);
    write_hf(base + "/hf", bad);
    const std::string e = error_of([&] { import_hf_t5(base + "/hf", base + "/c"); });
    EXPECT_TRUE(has(e, "tensor '" + norm + "' is " + dt + ", not a float")) << e;
    EXPECT_TRUE(has(e, "quantized checkpoints are not supported")) << e;
    EXPECT_FALSE(fs::exists(base + "/c"));
  }
}

// An older sharded export left in the directory: export removes it; import
// reads model.safetensors first, as transformers does.
TEST(HfConvert, StaleShardsAreRemovedAndModelSafetensorsWins) {
  const std::string base = tmpdir("stale");
  NamedTensors old_params = save_tiny(base + "/old", true, false);
  export_hf_t5(base + "/old/checkpoint_100", base + "/hf");
  NamedTensors old_hf = read_safetensors(base + "/hf/model.safetensors").tensors;
  write_safetensors(base + "/hf/model-00001-of-00002.safetensors", old_hf, {{"format", "pt"}});
  write_safetensors(base + "/hf/other.safetensors", {}, {{"format", "pt"}});
  nlohmann::json idx;
  for (auto& [n, t] : old_hf) idx["weight_map"][n] = "model-00001-of-00002.safetensors";
  idx["weight_map"]["x"] = "other.safetensors";  // a shard of any name listed in the index
  fileio::write_text(base + "/hf/model.safetensors.index.json", idx.dump(), false);
  fileio::write_text(base + "/hf/pytorch_model.bin", "old", false);
  fileio::write_text(base + "/hf/tokenizer.json", "{}", false);

  // Both: model.safetensors wins. Make it differ from the shards first.
  NamedTensors changed = old_hf;
  for (auto& [n, t] : changed) if (n == "shared.weight") t.data[0] ^= 1;
  write_hf(base + "/hf", changed);
  CheckpointReader r = CheckpointReader::open(import_hf_t5(base + "/hf", base + "/a"));
  EXPECT_EQ(r.read("target/token_embedder/embedding"), find_t(changed, "shared.weight"));

  auto params = testing_util::random_params(testing_util::t5_param_shapes(40, 8, 4, 3, 16, 2, 2, true, false));
  params[0].second.data[0] ^= 1;  // another model than the stale shards'
  std::vector<SaveLeaf> leaves;
  for (const auto& [n, t] : params) leaves.push_back(SaveLeaf::whole("target/" + n, t));
  SaveOptions so;
  so.durable = false;
  save_checkpoint(base + "/new", 1, leaves, so);
  HfExportResult ex = export_hf_t5(base + "/new/checkpoint_1", base + "/hf");
  EXPECT_EQ(ex.removed, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model.safetensors.index.json",
                                                  "other.safetensors", "pytorch_model.bin"}));
  EXPECT_FALSE(fs::exists(base + "/hf/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(base + "/hf/tokenizer.json"));
  expect_same_target(import_hf_t5(base + "/hf", base + "/b"), params);
}

TEST(HfConvert, DuplicateTensorAcrossShardsNamesBoth) {
  const std::string base = tmpdir("dup");
  save_tiny(base + "/model", true, false);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  NamedTensors hf = read_safetensors(base + "/hf/model.safetensors").tensors;
  fs::remove(base + "/hf/model.safetensors");
  NamedTensors a(hf.begin(), hf.begin() + 10), b(hf.begin() + 9, hf.end());
  write_safetensors(base + "/hf/s1.safetensors", a, {});
  write_safetensors(base + "/hf/s2.safetensors", b, {});
  nlohmann::json idx;
  for (auto& [n, t] : a) idx["weight_map"][n] = "s1.safetensors";
  for (auto& [n, t] : b) idx["weight_map"][n] = "s2.safetensors";
  fileio::write_text(base + "/hf/model.safetensors.index.json", idx.dump(), false);
  const std::string e = error_of([&] { read_hf_tensors(base + "/hf"); });
  EXPECT_TRUE(has(e, "tensor '" + hf[9].first + "' is in two shards, s1.safetensors and s2.safetensors")) << e;
}

// A FIFO would block the reader forever; a directory fails obscurely.
TEST(HfConvert, ImportRefusesNonRegularFiles) {
  const std::string base = tmpdir("fifo");
  save_tiny(base + "/model", true, false);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  for (const char* f : {"config.json", "model.safetensors"}) {
    const std::string path = base + "/hf/" + f, keep = path + ".keep";
    fs::rename(path, keep);
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
    std::string e = error_of([&] { import_hf_t5(base + "/hf", base + "/out"); });
    EXPECT_TRUE(has(e, path + ": not a regular file (a FIFO)")) << e;
    fs::remove(path);
    fs::create_directory(path);
    e = error_of([&] { import_hf_t5(base + "/hf", base + "/out"); });
    EXPECT_TRUE(has(e, path + ": not a regular file (a directory)")) << e;
    fs::remove(path);
    fs::rename(keep, path);
  }
  EXPECT_FALSE(fs::exists(base + "/out"));
}

// A conversion into a run would mix models (and its resume pick the new step).
TEST(HfConvert, ImportRefusesADirectoryHoldingARun) {
  const std::string base = tmpdir("run");
  save_tiny(base + "/model", true, false);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  HfImportOptions o;
  o.step = 7;
  std::string e = error_of([&] { import_hf_t5(base + "/hf", base + "/model", o); });
  EXPECT_TRUE(has(e, base + "/model already holds checkpoint_100 (a run or an earlier conversion); nothing was "
                     "written\n  hint: choose a new output directory")) << e;
  EXPECT_FALSE(fs::exists(base + "/model/checkpoint_7"));
  fs::create_directories(base + "/gin_only");
  fileio::write_text(base + "/gin_only/model.gin", "x = 1\n", false);
  e = error_of([&] { import_hf_t5(base + "/hf", base + "/gin_only", o); });
  EXPECT_TRUE(has(e, "already holds model.gin")) << e;
  EXPECT_EQ(fileio::read_text(base + "/gin_only/model.gin"), "x = 1\n");
}

TEST(HfConvert, ImportRefusesAnotherLayerNormEpsilon) {
  const std::string base = tmpdir("eps");
  save_tiny(base + "/model", true, false);
  export_hf_t5(base + "/model/checkpoint_100", base + "/hf");
  set_config(base + "/hf", "layer_norm_epsilon", 1e-5);
  const std::string e = error_of([&] { import_hf_t5(base + "/hf", base + "/out"); });
  EXPECT_TRUE(has(e, "config.json's layer_norm_epsilon is 1e-05, but t5x's T5 layer norm uses 1e-6")) << e;
  set_config(base + "/hf", "layer_norm_epsilon", 1e-6);
  EXPECT_NO_THROW(import_hf_t5(base + "/hf", base + "/ok"));
}

TEST(HfConvert, Float16ExportRefusesValuesBeyondItsRange) {
  const std::string base = tmpdir("f16");
  auto params = testing_util::random_params(testing_util::t5_param_shapes(40, 8, 4, 3, 16, 2, 2, true, false));
  std::vector<SaveLeaf> leaves;
  for (auto& [n, t] : params) {
    if (n == "encoder/encoder_norm/scale") reinterpret_cast<float*>(t.data.data())[3] = -70000.f;
    leaves.push_back(SaveLeaf::whole("target/" + n, t));
  }
  SaveOptions so;
  so.durable = false;
  save_checkpoint(base + "/model", 1, leaves, so);
  const std::string e = error_of([&] { export_hf_t5(base + "/model/checkpoint_1", base + "/hf", "float16"); });
  EXPECT_TRUE(has(e, "t5x parameter 'encoder/encoder_norm/scale' has max |value| 70000.000000, beyond float16's range")) << e;
  EXPECT_NO_THROW(export_hf_t5(base + "/model/checkpoint_1", base + "/hf", "bfloat16"));
}

TEST(HfConvert, InferConfigRefusesKernelsThatAreNotHeadsTimesHeadDim) {
  std::vector<ParamShape> shapes = testing_util::t5_param_shapes(40, 8, 4, 4, 16, 1, 1, true, false);
  for (auto& p : shapes) if (p.name.ends_with("rel_embedding")) p.shape[0] = 3;  // 3 heads, 16-wide kernels
  const std::string e = error_of([&] { infer_hf_t5_config(shapes); });
  EXPECT_TRUE(has(e, "encoder/relpos_bias/rel_embedding has 3 heads but encoder/layers_0/attention/query/kernel is 16 wide"))
      << e;
}

}  // namespace
}  // namespace t5x
