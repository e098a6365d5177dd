// Orbax checkpoints, t5x's default format (train.py's use_orbax = True):
// the OCDBT stores TensorStore writes read back key for key (compressed
// nodes, interior nodes, inline and out-of-line values, several commits, a
// version tree, the numbered manifest kind); damaged stores are refused
// naming the file; a train state saved by orbax-checkpoint as t5x's
// OrbaxCheckpointManagerInterface saves it reads as the legacy checkpoint it
// came from (every array bitwise), scores the same, and resumes a run.
// The Python side is scripts/check/orbax_write.py in the interop venv.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/ocdbt.h"

namespace t5x::ckpt_testing {
namespace {

namespace fs = std::filesystem;

const std::string kTinyGin = "configs/models/t5_1_1/tiny.gin";

std::string python() { return T5X_PYTHON; }
std::string script() { return std::string(T5X_SOURCE_DIR) + "/scripts/check/orbax_write.py"; }

// Runs orbax_write.py; the test fails (not skips) when the venv lacks orbax.
void orbax_write(const std::string& args) {
  RunResult r = sh(quote(python()) + " " + quote(script()) + " " + args);
  ASSERT_EQ(r.rc, 0) << "orbax_write.py " << args << " failed (the interop venv of scripts/python_env.sh has "
                     << "orbax-checkpoint and tensorstore):\n" << r.out;
}

std::string hex(const std::vector<uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) s += {d[c >> 4], d[c & 15]};
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

class Ocdbt : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(temp_dir("ocdbt_stores"));
    orbax_write("stores " + quote(*root_));
  }
  static std::string* root_;
};
std::string* Ocdbt::root_ = nullptr;

TEST_F(Ocdbt, ReadsEveryKeyTensorStoreWrote) {
  for (const std::string name : {"zstd_small_nodes", "version_tree", "numbered_manifest"}) {
    SCOPED_TRACE(name);
    std::ifstream f(*root_ + "/" + name + ".json");
    ASSERT_TRUE(f.good());
    const auto expected = nlohmann::json::parse(f);
    OcdbtStore store = OcdbtStore::open(*root_ + "/" + name);
    ASSERT_EQ(store.size(), expected.size());
    std::vector<std::string> keys;
    for (const auto& [k, v] : expected.items()) keys.push_back(k);
    EXPECT_EQ(store.keys(), keys);  // both in byte order
    size_t indirect_sized = 0;
    for (const auto& [k, v] : expected.items()) {
      auto got = store.read(k);
      ASSERT_TRUE(got) << k;
      EXPECT_EQ(hex(*got), v.get<std::string>()) << k;
      indirect_sized += got->size() > 16;
    }
    EXPECT_GT(indirect_sized, 100u);  // values stored out of line, in the data files
    EXPECT_FALSE(store.read("no such key"));
    EXPECT_FALSE(store.has("target.encoder"));  // a prefix is not a key
  }
  // The later commits' values win and deleted keys are gone (what the JSON
  // holds is what TensorStore itself read back after all three commits).
  EXPECT_GT(OcdbtStore::open(*root_ + "/zstd_small_nodes").generation(), 1u);
}

TEST_F(Ocdbt, DamagedStoresAreRefusedNamingTheFile) {
  const std::string src = *root_ + "/zstd_small_nodes";
  const std::string dir = temp_dir("ocdbt_damaged");
  auto fresh = [&] {
    fs::remove_all(dir + "/s");
    fs::copy(src, dir + "/s", fs::copy_options::recursive);
    return dir + "/s";
  };
  auto read_all = [](const std::string& d) {
    OcdbtStore s = OcdbtStore::open(d);
    for (const auto& k : s.keys()) s.read(k);
  };
  // A flipped byte in the manifest: its CRC-32C.
  {
    const std::string d = fresh();
    std::fstream f(d + "/manifest.ocdbt", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    char c;
    f.seekg(20);
    f.get(c);
    f.seekp(20);
    f.put(char(c ^ 0x10));
    f.close();
    const std::string e = error_of([&] { read_all(d); });
    EXPECT_NE(e.find(d + "/manifest.ocdbt"), std::string::npos) << e;
    EXPECT_NE(e.find("CRC-32C mismatch"), std::string::npos) << e;
  }
  // Not a manifest at all.
  for (const auto& [bytes, message] : std::vector<std::pair<std::string, std::string>>{
           {"hello", "shorter than the 16-byte header"}, {std::string(32, '\0'), "magic value 0x00000000"}}) {
    const std::string d = fresh();
    std::ofstream(d + "/manifest.ocdbt", std::ios::binary) << bytes;
    const std::string e = error_of([&] { read_all(d); });
    EXPECT_NE(e.find(message), std::string::npos) << e;
    EXPECT_NE(e.find("manifest.ocdbt"), std::string::npos) << e;
  }
  // Each data file cut in half: the node or value past the cut names it.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(src + "/d")) files.push_back(e.path().filename().string());
  ASSERT_GE(files.size(), 3u);
  int refused = 0;
  for (const auto& name : files) {
    const std::string d = fresh();
    const std::string file = d + "/d/" + name;
    fs::resize_file(file, fs::file_size(file) / 2);
    const std::string e = error_of([&] { read_all(d); });
    if (e.empty()) continue;  // only values of keys a later commit replaced lay past the cut
    ++refused;
    EXPECT_NE(e.find(file), std::string::npos) << e;
    EXPECT_TRUE(e.find("past the end of the file") != std::string::npos || e.find("truncated") != std::string::npos)
        << e;
  }
  EXPECT_GE(refused, 2);
  // The data files gone.
  {
    const std::string d = fresh();
    fs::remove_all(d + "/d");
    const std::string e = error_of([&] { read_all(d); });
    EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
    EXPECT_NE(e.find(d + "/d/"), std::string::npos) << e;
  }
  // No store.
  EXPECT_NE(error_of([&] { OcdbtStore::open(dir + "/none"); }).find(dir + "/none/manifest.ocdbt"), std::string::npos);
  fs::remove_all(dir);
}

// A tiny T5.1.1 trained 2 steps in the legacy format, and the same train
// state saved by orbax-checkpoint as t5x saves it.
class Orbax : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(temp_dir("orbax"));
    RunResult r = sh(join_cmd(train_argv(*root_ + "/legacy", 2, 2)));
    ASSERT_EQ(r.rc, 0) << r.out;
    orbax_write("t5x-state " + quote(*root_ + "/legacy/checkpoint_2") + " " + quote(*root_ + "/orbax"));
  }
  static std::string* root_;
};
std::string* Orbax::root_ = nullptr;

TEST_F(Orbax, TrainStateReadsAsItsLegacyCheckpoint) {
  const std::string ckpt = *root_ + "/orbax/checkpoint_2";
  ASSERT_TRUE(fs::exists(ckpt + "/state/manifest.ocdbt"));
  ASSERT_TRUE(fs::exists(ckpt + "/state/_METADATA"));
  ASSERT_FALSE(fs::exists(ckpt + "/checkpoint"));
  std::string err;
  const auto legacy = digests(*root_ + "/legacy/checkpoint_2");
  const auto orbax = digests(ckpt, &err);
  ASSERT_TRUE(err.empty()) << err;
  ASSERT_GT(legacy.size(), 20u);
  EXPECT_EQ(orbax, legacy);  // the same paths, dtypes, shapes and bits
  EXPECT_TRUE(orbax.count("state/step"));
  EXPECT_TRUE(orbax.count("target/token_embedder/embedding"));

  CheckpointReader r = CheckpointReader::open(ckpt);
  ASSERT_NE(r.orbax_store(), nullptr);
  EXPECT_EQ(r.step(), 2);
  EXPECT_EQ(r.dir(), ckpt + "/state");
  // A box of an array: only its chunks are read.
  const auto full = r.read("target/token_embedder/embedding");
  const auto box = r.read("target/token_embedder/embedding", IndexBox{{5, 3}, {9, 11}});
  ASSERT_EQ(box.shape, (std::vector<int64_t>{4, 8}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 8; ++j)
      EXPECT_EQ(box.values<float>()[size_t(i * 8 + j)], full.values<float>()[size_t((5 + i) * full.shape[1] + 3 + j)]);
  // The step directory counts as a complete checkpoint of MODEL_DIR.
  EXPECT_EQ(latest_step(*root_ + "/orbax"), 2);
  EXPECT_EQ(validate_checkpoint(ckpt, Verify::kDecode), std::nullopt);

  RunResult info = sh(quote(t5x_bin()) + " ckpt info " + quote(ckpt));
  ASSERT_EQ(info.rc, 0) << info.out;
  EXPECT_NE(info.out.find("Orbax"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("ocdbt/zarr/zstd"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("verified: the OCDBT store's manifest and nodes (CRC-32C), every array's chunks present "
                          "and decoded"),
            std::string::npos)
      << info.out;
}

TEST_F(Orbax, ScoresAndResumesAsItsLegacyCheckpoint) {
  const std::string a = score(*root_ + "/legacy/checkpoint_2", kTinyGin, *root_ + "/score_legacy");
  const std::string b = score(*root_ + "/orbax/checkpoint_2", kTinyGin, *root_ + "/score_orbax");
  EXPECT_NE(a.find("\"score\":"), std::string::npos) << a;
  EXPECT_EQ(a, b);

  // Resume to step 4 from each. t5x keeps its data position in a TF iterator
  // checkpoint t5x.cpp does not read, so the legacy run's position is removed
  // too: both restart the data stream, and their losses must be equal.
  const std::string la = *root_ + "/resume_legacy", ob = *root_ + "/resume_orbax";
  fs::create_directories(la);
  fs::copy(*root_ + "/legacy/checkpoint_2", la + "/checkpoint_2", fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(la + "/checkpoint_2"))
    if (e.path().filename().string().rfind("train_ds-", 0) == 0) fs::remove(e.path());
  fs::remove(la + "/checkpoint_2/manifest.t5xcpp.json");  // it lists the removed files
  fs::create_directories(ob);
  fs::copy(*root_ + "/orbax/checkpoint_2", ob + "/checkpoint_2", fs::copy_options::recursive);
  for (const auto& d : {la, ob}) {
    RunResult r = sh(join_cmd(train_argv(d, 4, 2)));
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("resumed from " + d + "/checkpoint_2 at step 2"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("holds no data position"), std::string::npos) << r.out;
  }
  const auto lo = losses(la), lb = losses(ob);
  ASSERT_TRUE(lo.count(3) && lo.count(4)) << "no losses at steps 3 and 4";
  EXPECT_EQ(lo.at(3), lb.at(3));
  EXPECT_EQ(lo.at(4), lb.at(4));
  // The run goes on in t5x.cpp's own format beside t5x's checkpoint.
  EXPECT_TRUE(fs::exists(ob + "/checkpoint_4/checkpoint"));
  EXPECT_EQ(digests(la + "/checkpoint_4"), digests(ob + "/checkpoint_4"));
}

TEST_F(Orbax, WhatItDoesNotReadIsRefusedWithTheReason) {
  const std::string src = *root_ + "/orbax/checkpoint_2";
  const std::string dir = temp_dir("orbax_refused");
  auto fresh = [&] {
    fs::remove_all(dir + "/c");
    fs::copy(src, dir + "/c", fs::copy_options::recursive);
    return dir + "/c";
  };
  auto edit_metadata = [](const std::string& c, const std::function<void(nlohmann::json&)>& f) {
    std::ifstream in(c + "/state/_METADATA");
    auto j = nlohmann::json::parse(in);
    f(j);
    std::ofstream(c + "/state/_METADATA") << j.dump();
  };
  auto open_error = [](const std::string& c) { return error_of([&] { CheckpointReader::open(c); }); };
  {  // zarr v3 arrays: not damage, so `ckpt info` does not call it that
    const std::string c = fresh();
    edit_metadata(c, [](nlohmann::json& j) { j["use_zarr3"] = true; });
    const std::string e = open_error(c);
    EXPECT_NE(e.find("zarr v3 (use_zarr3=True)"), std::string::npos) << e;
    EXPECT_NE(e.find(c + "/state/_METADATA"), std::string::npos) << e;
    RunResult info = sh(quote(t5x_bin()) + " ckpt info " + quote(c));
    EXPECT_EQ(info.rc, 1);
    EXPECT_NE(info.out.find(c + " (Orbax) cannot be read: "), std::string::npos) << info.out;
    EXPECT_EQ(info.out.find("damaged"), std::string::npos) << info.out;
  }
  {  // an array of the store that _METADATA does not list (a restore would miss it)
    const std::string c = fresh();
    std::string dropped;
    edit_metadata(c, [&](nlohmann::json& j) {
      auto& tree = j["tree_metadata"];
      for (auto it = tree.begin(); it != tree.end(); ++it)
        if (it.key().find("'v_row'") != std::string::npos) {
          for (const auto& k : it.value()["key_metadata"])
            dropped += (dropped.empty() ? "" : ".") + k["key"].get<std::string>();
          tree.erase(it);
          break;
        }
    });
    ASSERT_FALSE(dropped.empty());
    const std::string e = open_error(c);
    EXPECT_NE(e.find("_METADATA does not list the array '" + dropped + "' that the OCDBT store holds"), std::string::npos)
        << e;
  }
  {  // _METADATA gone: named, and a resume's scan skips the step but leaves it (t5x's) in place
    const std::string model_dir = dir + "/m";
    fs::create_directories(model_dir);
    fs::copy(src, model_dir + "/checkpoint_2", fs::copy_options::recursive);
    fs::remove(model_dir + "/checkpoint_2/state/_METADATA");
    const std::string e = open_error(model_dir + "/checkpoint_2");
    EXPECT_NE(e.find("is an Orbax checkpoint without _METADATA"), std::string::npos) << e;
    StepScan scan = latest_valid_step(model_dir, {.move_damaged_aside = true});
    EXPECT_FALSE(scan.step);
    ASSERT_EQ(scan.skipped.size(), 1u);
    EXPECT_TRUE(scan.moved.empty());
    EXPECT_TRUE(fs::exists(model_dir + "/checkpoint_2/state/manifest.ocdbt"));
  }
  {  // a leaf whose array is not in the store
    const std::string c = fresh();
    edit_metadata(c, [](nlohmann::json& j) {
      auto& tree = j["tree_metadata"];
      auto entry = tree.begin().value();
      entry["key_metadata"] = nlohmann::json::array({{{"key", "extra"}, {"key_type", 2}}});
      tree["('extra',)"] = entry;
    });
    const std::string e = open_error(c);
    EXPECT_NE(e.find("'extra' (jax.Array) has no array in the OCDBT store (no key 'extra/.zarray')"), std::string::npos)
        << e;
  }
  {  // _METADATA not JSON
    const std::string c = fresh();
    std::ofstream(c + "/state/_METADATA") << "{not json";
    const std::string e = open_error(c);
    EXPECT_NE(e.find(c + "/state/_METADATA: not valid JSON"), std::string::npos) << e;
  }
  {  // Orbax without OCDBT
    const std::string c = fresh();
    fs::remove(c + "/state/manifest.ocdbt");
    const std::string e = open_error(c);
    EXPECT_NE(e.find("use_ocdbt=True"), std::string::npos) << e;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace t5x::ckpt_testing
