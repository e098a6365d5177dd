#include "t5x/checkpoints/checkpoint_dir.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/dtype_bf16.h"
#include "error_of.h"
#include "t5x/checkpoints/crc32c.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/model_info.h"
#include "../../common/tmpdir.h"

namespace t5x {
namespace {

namespace fs = std::filesystem;

using t5x_test::tmpdir;

HostTensor iota(const std::string& dtype, std::vector<int64_t> shape, float scale = 1.f) {
  HostTensor t = HostTensor::zeros(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = float(i) * scale - 3.f;
    if (dtype == "float32") std::memcpy(t.data.data() + 4 * i, &v, 4);
    else if (dtype == "bfloat16") { uint16_t b = bfloat16::from_float(v); std::memcpy(t.data.data() + 2 * i, &b, 2); }
    else if (dtype == "int32") { int32_t x = int32_t(i); std::memcpy(t.data.data() + 4 * i, &x, 4); }
  }
  return t;
}

HostTensor slice2d(const HostTensor& t, const IndexBox& b) {
  HostTensor o = HostTensor::zeros(t.dtype, b.extent());
  copy_box(t.data.data(), IndexBox::full(t.shape), o.data.data(), b, dtype_itemsize(t.dtype));
  return o;
}

// A small train state: partitioned kernels, an inline step and factored slots.
std::vector<SaveLeaf> state_for_process(const HostTensor& kernel, const HostTensor& emb, int p, int nproc,
                                        int32_t step) {
  std::vector<SaveLeaf> leaves;
  // kernel [8, 12] sharded along dim 1 over nproc processes ("model" axis).
  const int64_t w = 12 / nproc;
  IndexBox kb{{0, p * w}, {8, p * w + w}};
  leaves.push_back(SaveLeaf::sharded("target/encoder/layers_0/attention/query/kernel", slice2d(kernel, kb), {8, 12}, kb));
  // embedding [6, 4] replicated: every process holds it, only process 0 writes.
  leaves.push_back(SaveLeaf::sharded("target/token_embedder/embedding", emb, {6, 4}, IndexBox::full({6, 4}), p == 0));
  leaves.push_back(SaveLeaf::inline_array("state/step", HostTensor::from_values<int32_t>("int32", {}, {step})));
  leaves.push_back(SaveLeaf::inline_array("state/param_states/encoder/layers_0/attention/query/kernel/v_row",
                                          HostTensor::from_values<float>("float32", {8}, {1, 2, 3, 4, 5, 6, 7, 8})));
  return leaves;
}

TEST(CheckpointDir, FourProcessSaveThenRestoreAnySlice) {
  const std::string model_dir = tmpdir("multi");
  HostTensor kernel = iota("float32", {8, 12}, 0.5f);
  HostTensor emb = iota("float32", {6, 4}, 0.25f);
  const int n = 4;
  std::barrier sync(n);
  std::vector<std::thread> threads;
  std::vector<SaveResult> results(n);
  for (int p = 0; p < n; ++p) {
    threads.emplace_back([&, p] {
      SaveOptions opt;
      opt.process_index = p;
      opt.process_count = n;
      opt.barrier = [&](const std::string&) { sync.arrive_and_wait(); };
      opt.timestamp = 1700000000;
      opt.compressor = {"zstd", 1};
      opt.durable = false;
      opt.dataset_state_json = "{\"position\": " + std::to_string(100 + p) + "}";
      results[p] = save_checkpoint(model_dir, 20, state_for_process(kernel, emb, p, n, 20), opt);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0].dir, model_dir + "/checkpoint_20");
  EXPECT_FALSE(fs::exists(model_dir + "/checkpoint_20.tmp-1700000000"));
  const std::string adir = model_dir + "/checkpoint_20/target.encoder.layers_0.attention.query.kernel";
  EXPECT_TRUE(fs::exists(adir + "/0.3"));
  EXPECT_EQ(zarr_read_metadata(adir).chunks, (std::vector<int64_t>{8, 3}));

  CheckpointReader r = CheckpointReader::open(model_dir + "/checkpoint_20");
  EXPECT_EQ(r.version(), 3);
  EXPECT_EQ(r.step(), 20);
  EXPECT_EQ(r.read("target/encoder/layers_0/attention/query/kernel").data, kernel.data);
  EXPECT_EQ(r.read("target/token_embedder/embedding").data, emb.data);
  // Restore on a (2 x 1) layout: rows split instead of columns.
  IndexBox rows{{4, 0}, {8, 12}};
  EXPECT_EQ(r.read("target/encoder/layers_0/attention/query/kernel", rows).data, slice2d(kernel, rows).data);
  EXPECT_EQ(r.read("state/param_states/encoder/layers_0/attention/query/kernel/v_row").values<float>()[7], 8.f);
  EXPECT_EQ(*r.dataset_state(2, 4), "{\"position\": 102}");
  EXPECT_EQ(latest_step(model_dir), 20);
  EXPECT_FALSE(validate_checkpoint(model_dir + "/checkpoint_20", Verify::kDecode).has_value());
  // The manifest holds every file of all four processes (their notes merged,
  // then removed): kernel chunks 0.0-0.3 come one from each process.
  auto m = read_manifest(model_dir + "/checkpoint_20");
  ASSERT_TRUE(m.has_value());
  std::set<std::string> on_disk;
  for (const auto& e : fs::recursive_directory_iterator(model_dir + "/checkpoint_20"))
    if (e.is_regular_file()) on_disk.insert(fs::relative(e.path(), model_dir + "/checkpoint_20").generic_string());
  std::set<std::string> listed;
  for (const auto& [rel, d] : m->files) {
    listed.insert(rel);
    EXPECT_EQ(d, FileDigest::of(fileio::read_file(model_dir + "/checkpoint_20/" + rel))) << rel;
  }
  on_disk.erase(kManifestFile);
  EXPECT_EQ(listed, on_disk);
  for (const char* f : {"checkpoint", "train_ds-003-of-004.json",
                        "target.encoder.layers_0.attention.query.kernel/.zarray",
                        "target.encoder.layers_0.attention.query.kernel/0.3", "target.token_embedder.embedding/0.0"})
    EXPECT_TRUE(listed.count(f)) << f;
  EXPECT_EQ(listed.size(), 1u + 4u + 2u + 4u + 1u);  // msgpack, data positions, 2 .zarray, chunks
}

TEST(CheckpointDir, SaveDtypeCastsTargetOnlyAndRestoreCasts) {
  const std::string model_dir = tmpdir("cast");
  HostTensor k = iota("float32", {4, 4}, 0.1f);
  std::vector<SaveLeaf> leaves;
  leaves.push_back(SaveLeaf::sharded("target/k", k, {4, 4}, IndexBox::full({4, 4})));
  leaves.push_back(SaveLeaf::inline_array("target/scale", iota("float32", {4})));
  leaves.push_back(SaveLeaf::sharded("state/param_states/k/v", k, {4, 4}, IndexBox::full({4, 4})));
  SaveOptions opt;
  opt.save_dtype = "bfloat16";
  opt.durable = false;
  save_checkpoint(model_dir, 1, leaves, opt);
  CheckpointReader r = CheckpointReader::open(model_dir + "/checkpoint_1");
  EXPECT_EQ(r.info("target/k").dtype, "bfloat16");
  EXPECT_EQ(r.info("target/scale").dtype, "bfloat16");
  EXPECT_EQ(r.info("state/param_states/k/v").dtype, "float32");
  EXPECT_EQ(r.read("target/k").data, cast_host_tensor(k, "bfloat16").data);
  EXPECT_EQ(r.read("target/k", std::nullopt, "float32").data,
            cast_host_tensor(cast_host_tensor(k, "bfloat16"), "float32").data);
  try {
    r.read_expect("target/k", {4, 5});
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("Shape of `target/k` in checkpoint (4, 4) does not match expected (4, 5)"),
              std::string::npos)
        << e.what();
  }
}

SaveResult save_simple(const std::string& model_dir, int64_t step, SaveOptions opt = {}) {
  opt.durable = false;
  std::vector<SaveLeaf> leaves;
  leaves.push_back(SaveLeaf::sharded("target/w", iota("float32", {16, 16}, float(step)), {16, 16}, IndexBox::full({16, 16})));
  leaves.back().chunks = {8, 16};
  leaves.push_back(SaveLeaf::inline_array("state/step", HostTensor::from_values<int32_t>("int32", {}, {int32_t(step)})));
  return save_checkpoint(model_dir, step, leaves, opt);
}

// Flips `n` bytes in the middle of a file (same size).
void flip_bytes(const std::string& path, size_t n = 16) {
  auto b = fileio::read_file(path);
  ASSERT_GE(b.size(), n);
  const size_t at = (b.size() - n) / 2;
  for (size_t i = 0; i < n; ++i) b[at + i] ^= 0x5a;
  fileio::write_file(path, b, false);
}

TEST(Crc32c, CheckValuesAndEveryLengthAndAlignment) {
  const std::string s = "123456789";
  EXPECT_EQ(checksum::crc32c(s.data(), s.size()), 0xE3069283u);  // RFC 3720 check value
  EXPECT_EQ(checksum::crc32c_portable(s.data(), s.size()), 0xE3069283u);
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xff);
  EXPECT_EQ(checksum::crc32c(zeros.data(), 32), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(checksum::crc32c(ones.data(), 32), 0x62A8AB43u);
  std::mt19937 rng(3);
  std::vector<uint8_t> buf(300);
  for (auto& c : buf) c = uint8_t(rng());
  // A byte-at-a-time oracle, independent of both implementations.
  auto slow = [](const uint8_t* p, size_t n) {
    uint32_t c = ~0u;
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
  };
  for (size_t off = 0; off < 8; ++off)
    for (size_t n = 0; n + off <= 80; ++n) {
      const uint32_t want = slow(buf.data() + off, n);
      ASSERT_EQ(checksum::crc32c(buf.data() + off, n), want) << off << " " << n;
      ASSERT_EQ(checksum::crc32c_portable(buf.data() + off, n), want) << off << " " << n;
    }
  // Extending: crc(a ++ b) == crc(b, crc(a)).
  EXPECT_EQ(checksum::crc32c(buf.data() + 77, 223, checksum::crc32c(buf.data(), 77)), slow(buf.data(), 300));
}

// One run per MODEL_DIR: another process holding process 0's lock makes the
// next run wait, then refuse with the directory named; the lock goes with its
// process (here a child that exits), and one process may take it again.
TEST(ModelDirLock, AnotherProcessHoldingTheLockIsWaitedForThenRefused) {
  const std::string dir = tmpdir("dir_lock");
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    {
      ModelDirLock held(dir, 0);
      char c = 1;
      (void)!::write(ready[1], &c, 1);
      (void)!::read(release[0], &c, 1);
    }
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  std::string told;
  const std::string e = testing_ckpt::error_of([&] { ModelDirLock l(dir, 0, 0.5, [&](const std::string& s) { told = s; }); });
  EXPECT_NE(e.find(dir + " is in use by another training run"), std::string::npos) << e;
  EXPECT_NE(e.find("hint: wait for that run to end, or train into another MODEL_DIR"), std::string::npos) << e;
  EXPECT_NE(told.find("waiting for " + dir), std::string::npos) << told;
  { ModelDirLock other_rank(dir, 1, 0.5); }  // another process number: its own lock
  (void)!::write(release[1], &c, 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ModelDirLock mine(dir, 0, 5.0);
  ModelDirLock again(dir, 0, 0.0);  // the same process: taken again at once
}

TEST(CheckpointDir, ExistingStepIsSkipped) {
  const std::string model_dir = tmpdir("skip");
  EXPECT_FALSE(save_simple(model_dir, 3).skipped_existing);
  EXPECT_TRUE(save_simple(model_dir, 3).skipped_existing);
}

// A checkpoint_<digits> directory whose step does not fit in int64 made
// std::stoll throw std::out_of_range (no CheckpointError, no path).
TEST(CheckpointDir, StepPastInt64IsANamedError) {
  const std::string model_dir = tmpdir("huge_step");
  save_simple(model_dir, 10);
  fs::create_directories(model_dir + "/checkpoint_99999999999999999999");
  try {
    all_steps(model_dir);
    FAIL() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(model_dir + "/checkpoint_99999999999999999999: the step "
                                         "99999999999999999999 does not fit in int64"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(model_dir + "/checkpoint_99999999999999999999");
  fs::create_directories(model_dir + "/checkpoint_9223372036854775807");  // INT64_MAX still is a step
  EXPECT_EQ(all_steps(model_dir), (std::vector<int64_t>{10, INT64_MAX}));
}

TEST(CheckpointDir, CrashLeavesTmpDirThatResumeIgnores) {
  const std::string model_dir = tmpdir("crash");
  save_simple(model_dir, 10);
  SaveOptions crash;
  crash.crash_before_msgpack = true;
  crash.timestamp = 123;
  save_simple(model_dir, 20, crash);
  EXPECT_TRUE(fs::exists(model_dir + "/checkpoint_20.tmp-123"));
  EXPECT_EQ(all_steps(model_dir), std::vector<int64_t>{10});
  StepScan scan = latest_valid_step(model_dir);
  EXPECT_EQ(scan.step, 10);
  ASSERT_EQ(scan.skipped.size(), 1u);
  EXPECT_NE(scan.skipped[0].first.find("checkpoint_20.tmp-123"), std::string::npos);
  EXPECT_NE(scan.report().find("half-written"), std::string::npos);
  EXPECT_EQ(remove_temp_dirs(model_dir), std::vector<std::string>{model_dir + "/checkpoint_20.tmp-123"});
  EXPECT_TRUE(list_temp_dirs(model_dir).empty());
  EXPECT_TRUE(fs::exists(model_dir + "/checkpoint_10/checkpoint"));
}

TEST(CheckpointDir, DamagedCheckpointsFallBackToNewestComplete) {
  const std::string model_dir = tmpdir("damaged");
  save_simple(model_dir, 1);
  save_simple(model_dir, 2);
  save_simple(model_dir, 3);
  save_simple(model_dir, 4);
  // 4: truncated chunk; 3: corrupt msgpack; 2: msgpack missing (renamed by hand).
  const std::string chunk = model_dir + "/checkpoint_4/target.w/1.0";
  auto b = fileio::read_file(chunk);
  b.resize(b.size() - 7);
  fileio::write_file(chunk, b, false);
  auto m = fileio::read_file(model_dir + "/checkpoint_3/checkpoint");
  m.resize(m.size() / 2);
  fileio::write_file(model_dir + "/checkpoint_3/checkpoint", m, false);
  fs::remove(model_dir + "/checkpoint_2/checkpoint");

  StepScan scan = latest_valid_step(model_dir);
  EXPECT_EQ(scan.step, 1);
  ASSERT_EQ(scan.skipped.size(), 3u);
  EXPECT_NE(scan.skipped[0].second.find("target.w/1.0"), std::string::npos) << scan.skipped[0].second;
  EXPECT_NE(scan.skipped[1].second.find("truncated or corrupt"), std::string::npos) << scan.skipped[1].second;
  EXPECT_NE(scan.skipped[2].second.find("is missing"), std::string::npos) << scan.skipped[2].second;
  // Restoring the damaged one directly names the chunk file.
  try {
    CheckpointReader::open(model_dir + "/checkpoint_4").read("target/w");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(chunk), std::string::npos) << e.what();
  }
  EXPECT_THROW(CheckpointReader::open(model_dir + "/checkpoint_3"), CheckpointError);
}

TEST(CheckpointDir, ManifestListsEveryFileAndRoundTrips) {
  const std::string model_dir = tmpdir("manifest");
  const std::string d = save_simple(model_dir, 1).dir;
  auto m = read_manifest(d);
  ASSERT_TRUE(m.has_value());
  std::vector<std::string> names;
  for (const auto& [rel, digest] : m->files) names.push_back(rel);
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint", "target.w/.zarray", "target.w/0.0", "target.w/1.0"}));
  const auto msgpack = fileio::read_file(d + "/checkpoint");
  EXPECT_EQ(m->files.at("checkpoint").bytes, msgpack.size());
  EXPECT_EQ(m->files.at("checkpoint").crc32c, checksum::crc32c(msgpack.data(), msgpack.size()));
  EXPECT_EQ(CheckpointManifest::from_json(m->to_json(), "x").files, m->files);
  EXPECT_FALSE(validate_checkpoint(d, Verify::kChecksums).has_value());
  // A manifest that is not one names its file.
  try {
    CheckpointManifest::from_json(R"({"format":"t5x.cpp checkpoint manifest","version":1,"checksum":"crc32c",)"
                                  R"("files":{"a/0.0":{"bytes":3,"crc32c":"xyz"}}})", "m.json");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("m.json: bad entry for \"a/0.0\""), std::string::npos) << e.what();
  }
  fileio::write_text(d + "/" + kManifestFile, "{\"format\": \"t5x.cpp", false);
  auto err = validate_checkpoint(d);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find(d + "/" + kManifestFile + ": not valid JSON"), std::string::npos) << *err;
}

// The trial's damage (issue 22, findings 1, 2 and 8): each kind is found by
// the level that can see it, names the file, and the scan that moves damaged
// steps aside falls back to the previous step.
TEST(CheckpointDir, ManifestFindsTruncationBitFlipsAndMissingFiles) {
  struct Case {
    const char* name;
    const char* file;        // relative to checkpoint_2
    int sizes_see_it;        // Verify::kSizes finds it: 1 yes, 0 no (only the CRCs do), -1 either
    const char* message;
  };
  const Case cases[] = {
      {"truncated_chunk", "target.w/1.0", 1, "/target.w/1.0: truncated or corrupt ("},
      {"flipped_chunk", "target.w/1.0", 0, "/target.w/1.0: crc32c 0x"},
      // The msgpack parser may or may not trip over the flipped bytes.
      {"flipped_msgpack", "checkpoint", -1, "/checkpoint: crc32c 0x"},
      {"missing_zarray", "target.w/.zarray", 1, "/target.w/.zarray is missing (listed in manifest.t5xcpp.json)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string model_dir = tmpdir(std::string("damage_") + c.name);
    save_simple(model_dir, 1);
    const std::string d = save_simple(model_dir, 2).dir;
    const std::string f = d + "/" + c.file;
    if (std::string(c.name).starts_with("truncated")) fs::resize_file(f, fs::file_size(f) / 2);
    else if (std::string(c.name).starts_with("flipped")) flip_bytes(f);
    else fs::remove(f);
    if (c.sizes_see_it >= 0) {
      EXPECT_EQ(validate_checkpoint(d, Verify::kSizes).has_value(), c.sizes_see_it == 1);
    }
    auto err = validate_checkpoint(d, Verify::kChecksums);
    ASSERT_TRUE(err.has_value());
    EXPECT_NE(err->find(d + c.message), std::string::npos) << *err;

    StepScan scan = latest_valid_step(model_dir, {.verify = Verify::kChecksums, .move_damaged_aside = true});
    EXPECT_EQ(scan.step, 1);
    ASSERT_EQ(scan.moved.size(), 1u);
    EXPECT_EQ(scan.moved[0].first, d);
    EXPECT_TRUE(scan.moved[0].second.starts_with(d + ".damaged-")) << scan.moved[0].second;
    EXPECT_TRUE(fs::exists(scan.moved[0].second + "/" + kManifestFile));
    EXPECT_FALSE(fs::exists(d));
    EXPECT_EQ(all_steps(model_dir), std::vector<int64_t>{1});
    EXPECT_NE(scan.report().find("skipped " + d + ": " + d + c.message), std::string::npos) << scan.report();
    EXPECT_NE(scan.report().find("moved " + d + " aside to " + d + ".damaged-"), std::string::npos) << scan.report();
    // The step is saved again.
    EXPECT_FALSE(save_simple(model_dir, 2).skipped_existing);
    EXPECT_FALSE(validate_checkpoint(d, Verify::kChecksums).has_value());
  }
}

// Found by manifest_fuzzer: header fields of another JSON type escaped as
// nlohmann type_errors (std::terminate in the fuzzer) instead of naming the
// damaged manifest.
TEST(CheckpointDir, ManifestHeaderOfTheWrongTypeIsANamedError) {
  const std::string files = R"("files":{"a/0.0":{"bytes":3,"crc32c":"0000abcd"}})";
  for (const std::string& header : {std::string(R"("format":1,"version":1,"checksum":"crc32c")"),
                                    std::string(R"("format":"t5x.cpp checkpoint manifest","version":"1","checksum":"crc32c")"),
                                    std::string(R"("format":"t5x.cpp checkpoint manifest","version":1,"checksum":[])")}) {
    SCOPED_TRACE(header);
    try {
      (void)CheckpointManifest::from_json("{" + header + "," + files + "}", "ckpt/manifest.t5xcpp.json");
      ADD_FAILURE() << "accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("ckpt/manifest.t5xcpp.json: "), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(CheckpointManifest::from_json(R"({"format":"t5x.cpp checkpoint manifest","version":1,"checksum":"crc32c",)" +
                                              files + "}",
                                          "m")
                .files.at("a/0.0")
                .crc32c,
            0xabcdu);
}

// Checkpoints without a manifest (t5x's, older t5x.cpp's) keep the
// structure checks: a truncated chunk is still found at every level; a flip
// inside a gzip chunk (its size intact) by the chunk's own CRC-32, decoded at
// the checksum level (the trainer's resume scan: a resume stopped on the
// chunk instead of falling back, in the bad-input sweep of session 67).
TEST(CheckpointDir, CheckpointWithoutManifestKeepsStructureChecks) {
  const std::string model_dir = tmpdir("no_manifest");
  const std::string d = save_simple(model_dir, 1).dir;
  fs::remove(d + "/" + kManifestFile);
  EXPECT_FALSE(validate_checkpoint(d, Verify::kChecksums).has_value());
  flip_bytes(d + "/target.w/0.0", 4);
  EXPECT_FALSE(validate_checkpoint(d, Verify::kSizes).has_value());
  for (Verify level : {Verify::kChecksums, Verify::kDecode}) {
    auto bad = validate_checkpoint(d, level);
    ASSERT_TRUE(bad.has_value()) << int(level);
    EXPECT_NE(bad->find(d + "/target.w/0.0"), std::string::npos) << *bad;
  }
  fs::resize_file(d + "/target.w/0.0", 10);
  auto err = validate_checkpoint(d);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("damaged chunk '" + d + "/target.w/0.0'"), std::string::npos) << *err;
}

// Decoding reads an absent chunk as fill values, so without a manifest a
// missing chunk must still be reported at the decode level, as at the others.
TEST(CheckpointDir, MissingChunkWithoutManifestIsFoundAtEveryLevel) {
  const std::string model_dir = tmpdir("no_manifest_missing");
  const std::string d = save_simple(model_dir, 1).dir;
  fs::remove(d + "/" + kManifestFile);
  fs::remove(d + "/target.w/0.0");
  for (Verify level : {Verify::kSizes, Verify::kChecksums, Verify::kDecode}) {
    auto err = validate_checkpoint(d, level);
    ASSERT_TRUE(err.has_value()) << int(level);
    EXPECT_NE(err->find("missing chunk '" + d + "/target.w/0.0'"), std::string::npos) << *err;
  }
}

// A restore reads the files the manifest lists only as it records them,
// whatever the verify level of the scan before it: a same-size change to a
// chunk or a .zarray passes the sizes check but not the read.
TEST(CheckpointDir, ReaderRefusesListedFilesWhoseBytesChanged) {
  const std::string model_dir = tmpdir("read_crc");
  const std::string d = save_simple(model_dir, 1).dir;
  const HostTensor good = CheckpointReader::open(d).read("target/w");
  flip_bytes(d + "/target.w/1.0", 4);
  EXPECT_FALSE(validate_checkpoint(d, Verify::kSizes).has_value());
  std::string e = testing_ckpt::error_of([&] { CheckpointReader::open(d).read("target/w"); });
  EXPECT_NE(e.find(d + "/target.w/1.0: crc32c "), std::string::npos) << e;
  EXPECT_NE(e.find("hint: restore another checkpoint"), std::string::npos) << e;
  flip_bytes(d + "/target.w/1.0", 4);  // flipped back
  EXPECT_EQ(CheckpointReader::open(d).read("target/w").data, good.data);
  {
    auto z = fileio::read_file(d + "/target.w/.zarray");
    std::string t(z.begin(), z.end());
    const size_t at = t.find("<f4");
    ASSERT_NE(at, std::string::npos) << t;
    t[at] = '>';
    fileio::write_file(d + "/target.w/.zarray", std::vector<uint8_t>(t.begin(), t.end()), false);
  }
  EXPECT_FALSE(validate_checkpoint(d, Verify::kSizes).has_value());
  e = testing_ckpt::error_of([&] { CheckpointReader::open(d).read("target/w"); });
  EXPECT_NE(e.find(d + "/target.w/.zarray: crc32c "), std::string::npos) << e;
  fs::remove(d + "/target.w/0.0");
  fs::remove(d + "/target.w/.zarray");
  save_simple(model_dir, 2);
  const std::string d2 = model_dir + "/checkpoint_2";
  fs::remove(d2 + "/target.w/0.0");
  e = testing_ckpt::error_of([&] { CheckpointReader::open(d2).read("target/w"); });
  EXPECT_NE(e.find(d2 + "/target.w/0.0 is missing (listed in manifest.t5xcpp.json)"), std::string::npos) << e;
}

// A manifest lists every file of a t5x.cpp save: a chunk or .zarray it leaves
// out (an edited manifest, a file added later) is damage, not a file to read
// unchecked.
TEST(CheckpointDir, FileLeftOutOfTheManifestIsReported) {
  for (const std::string name : {"target.w/1.0", "target.w/.zarray"}) {
    const std::string model_dir = tmpdir("manifest_gap");
    const std::string d = save_simple(model_dir, 1).dir;
    ASSERT_FALSE(validate_checkpoint(d).has_value());
    auto bytes = fileio::read_file(d + "/" + kManifestFile);
    auto j = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()));
    ASSERT_EQ(j["files"].erase(name), 1u) << name;
    const std::string text = j.dump();
    fileio::write_file(d + "/" + kManifestFile, std::vector<uint8_t>(text.begin(), text.end()), false);
    auto err = validate_checkpoint(d);
    ASSERT_TRUE(err.has_value()) << name;
    EXPECT_NE(err->find(d + "/" + name + " is not listed in manifest.t5xcpp.json"), std::string::npos) << *err;
  }
}

// The .zarray must agree with the msgpack's spec on the dtype and chunks, as
// on the shape: an int32 .zarray under a float32 spec read the float bits as
// integers (and resumed training on them).
TEST(CheckpointDir, ZarrayDtypeOrChunksAgainstTheSpecAreRefused) {
  const std::string model_dir = tmpdir("spec_dtype");
  const std::string d = save_simple(model_dir, 1).dir;
  fs::remove(d + "/" + kManifestFile);
  auto edit = [&](const std::string& from, const std::string& to) {
    auto z = fileio::read_file(d + "/target.w/.zarray");
    std::string t(z.begin(), z.end());
    const size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << t;
    t.replace(at, from.size(), to);
    fileio::write_file(d + "/target.w/.zarray", std::vector<uint8_t>(t.begin(), t.end()), false);
  };
  edit("<f4", "<i4");
  auto err = validate_checkpoint(d, Verify::kSizes);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find(d + "/target.w/.zarray: dtype int32 differs from the msgpack spec of 'target/w' (float32)"),
            std::string::npos)
      << *err;
  std::string e = testing_ckpt::error_of([&] { CheckpointReader::open(d).read("target/w"); });
  EXPECT_NE(e.find("dtype int32 differs from the msgpack spec"), std::string::npos) << e;
  edit("<i4", "<f4");
  EXPECT_FALSE(validate_checkpoint(d, Verify::kDecode).has_value());
  edit("[8,16]", "[4,16]");
  err = validate_checkpoint(d, Verify::kSizes);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("chunks [4,16] differ from the msgpack spec of 'target/w' ([8,16])"), std::string::npos) << *err;
}

// Bad-input sweep: a regular file named checkpoint_2 made the save of step 2
// a silent no-op (taken as saved). The scan moves it aside like a damaged
// checkpoint, and a save that still meets one refuses by name.
TEST(CheckpointDir, AFileNamedLikeAStepIsMovedAsideAndNeverTakenAsSaved) {
  const std::string model_dir = tmpdir("file_named_step");
  save_simple(model_dir, 1);
  const std::string f = model_dir + "/checkpoint_2";
  fileio::write_text(f, "", false);
  EXPECT_EQ(testing_ckpt::error_of([&] { save_simple(model_dir, 2); }),
            f + " is a file, not a checkpoint directory: step 2 cannot be saved\n"
                "  hint: move or delete it (`t5x train` moves it aside when it starts)");
  StepScan scan = latest_valid_step(model_dir, {.move_damaged_aside = true});
  EXPECT_EQ(scan.step, 1);
  ASSERT_EQ(scan.moved.size(), 1u);
  EXPECT_EQ(scan.moved[0].first, f);
  EXPECT_TRUE(scan.moved[0].second.starts_with(f + ".damaged-")) << scan.moved[0].second;
  EXPECT_TRUE(fs::is_regular_file(scan.moved[0].second));
  EXPECT_NE(scan.report().find("skipped " + f + ": " + f + " is a file, not a checkpoint directory"),
            std::string::npos) << scan.report();
  EXPECT_NE(scan.report().find("moved " + f + " aside to " + f + ".damaged-"), std::string::npos) << scan.report();
  EXPECT_FALSE(save_simple(model_dir, 2).skipped_existing);
  EXPECT_FALSE(validate_checkpoint(f).has_value());
  // One older than the newest valid step is left where it is (never saved again).
  fileio::write_text(model_dir + "/checkpoint_0", "", false);
  EXPECT_EQ(latest_valid_step(model_dir, {.move_damaged_aside = true}).step, 2);
  EXPECT_TRUE(fs::is_regular_file(model_dir + "/checkpoint_0"));
}

// The manifest's size check named the wrong error: "cannot stat ...: Success"
// (fs::exists overwrote the error_code of file_size).
TEST(CheckpointDir, ADirectoryWhereTheManifestListsAFileNamesTheReason) {
  const std::string model_dir = tmpdir("manifest_dir_for_file");
  const std::string d = save_simple(model_dir, 1).dir;
  fs::remove(d + "/checkpoint");
  fs::create_directory(d + "/checkpoint");
  auto err = validate_checkpoint(d, Verify::kSizes);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(*err, "cannot stat " + d + "/checkpoint: " + std::make_error_code(std::errc::is_a_directory).message());
}

TEST(CheckpointDir, MoveDamagedAsideNeverOverwrites) {
  const std::string model_dir = tmpdir("move_aside");
  const std::string a = save_simple(model_dir, 3).dir;
  const std::string first = move_damaged_aside(a);
  save_simple(model_dir, 3);
  const std::string second = move_damaged_aside(a);
  EXPECT_NE(first, second);
  EXPECT_TRUE(fs::exists(first + "/checkpoint"));
  EXPECT_TRUE(fs::exists(second + "/checkpoint"));
  EXPECT_TRUE(all_steps(model_dir).empty());
  EXPECT_TRUE(list_temp_dirs(model_dir).empty());
}

TEST(CheckpointDir, MissingChunkIsReportedWhenFillValueIsNull) {
  const std::string model_dir = tmpdir("missing_chunk");
  save_simple(model_dir, 1);
  const std::string chunk = model_dir + "/checkpoint_1/target.w/0.0";
  fs::remove(chunk);
  auto err = validate_checkpoint(model_dir + "/checkpoint_1");
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find(chunk + " is missing (listed in manifest.t5xcpp.json)"), std::string::npos) << *err;
  // Without a manifest, from the .zarray's chunk grid.
  fs::remove(model_dir + "/checkpoint_1/" + kManifestFile);
  err = validate_checkpoint(model_dir + "/checkpoint_1");
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("missing chunk '" + chunk + "'"), std::string::npos) << *err;
}

// Orbax directories t5x.cpp cannot read (without OCDBT; a damaged manifest)
// are named as such, skipped by the scan, and left in place: they are t5x's.
// Readable ones: orbax_test.cpp.
TEST(CheckpointDir, UnreadableOrbaxCheckpointsAreNamedAndLeftInPlace) {
  const std::string model_dir = tmpdir("orbax");
  const std::string dir = model_dir + "/checkpoint_1";
  fs::create_directories(dir + "/state");
  fileio::write_text(dir + "/state/_METADATA", R"({"tree_metadata": {}})", false);
  for (const std::string expected : {"Orbax's _METADATA but no OCDBT manifest.ocdbt", "magic value 0x6e6f7420"}) {
    try {
      CheckpointReader::open(dir);
      FAIL();
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    StepScan scan = latest_valid_step(model_dir, {.move_damaged_aside = true});
    EXPECT_FALSE(scan.step.has_value());
    ASSERT_EQ(scan.skipped.size(), 1u);
    EXPECT_NE(scan.skipped[0].second.find(expected), std::string::npos) << scan.skipped[0].second;
    EXPECT_TRUE(scan.moved.empty());
    EXPECT_TRUE(fs::exists(dir + "/state/_METADATA"));
    fileio::write_text(dir + "/state/manifest.ocdbt", "not an OCDBT manifest", false);
  }
}

TEST(CheckpointDir, RetentionKeepsNewestAndPinned) {
  const std::string model_dir = tmpdir("keep");
  for (int s : {1, 2, 3}) save_simple(model_dir, s);
  pin_checkpoint(model_dir + "/checkpoint_1");
  SaveOptions opt;
  opt.keep = 2;
  SaveResult r = save_simple(model_dir, 4, opt);
  EXPECT_EQ(r.removed_steps, std::vector<int64_t>{2});
  EXPECT_EQ(all_steps(model_dir), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(apply_retention(model_dir, 1), std::vector<int64_t>{3});
  EXPECT_EQ(all_steps(model_dir), (std::vector<int64_t>{1, 4}));
}

TEST(CheckpointDir, StepRegexIgnoresOtherNames) {
  const std::string model_dir = tmpdir("names");
  for (auto n : {"checkpoint_5", "checkpoint_12", "checkpoint_7.tmp-99", "checkpoint_x", "train", "checkpoint_3a"})
    fs::create_directories(model_dir + "/" + n);
  EXPECT_EQ(all_steps(model_dir), (std::vector<int64_t>{5, 12}));
  EXPECT_EQ(list_temp_dirs(model_dir).size(), 1u);
  EXPECT_FALSE(latest_step(model_dir).has_value());  // none has a msgpack
}

TEST(ModelInfo, FormatsNamesShapesSpecsAndTotals) {
  std::vector<ModelInfoEntry> p = {
      {"decoder/decoder_norm/scale", {768}, {"embed"}, "(None,)", "float32"},
      {"token_embedder/embedding", {32128, 768}, {"vocab", "embed"}, "('model', None)", "float32"},
  };
  std::vector<ModelInfoEntry> o = {{"state/step", {}, {}, "None", "int32"}};
  std::string text = format_model_info(p, o);
  EXPECT_NE(text.find("Variable decoder/decoder_norm/scale size 768      shape (embed=768,)"), std::string::npos) << text;
  EXPECT_NE(text.find("shape (vocab=32128, embed=768) partition spec ('model', None)"), std::string::npos) << text;
  EXPECT_NE(text.find("Total number of parameters: 24675072\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Variable state/step size 1 shape () partition spec None"), std::string::npos) << text;
}

}  // namespace
}  // namespace t5x
