#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "t5x/summaries/crc32c.h"
#include "t5x/summaries/event_writer.h"
#include "t5x/summaries/metrics_writer.h"
#include "../../common/tmpdir.h"

namespace t5x {
namespace {

namespace fs = std::filesystem;

using t5x_test::tmpdir;

TEST(Crc32c, KnownVectors) {
  // RFC 3720 B.4 check value and all-zero / all-ones 32-byte vectors.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(unmask_crc32c(mask_crc32c(0x12345678u)), 0x12345678u);
}

TEST(Protobuf, VarintAndFields) {
  std::string s;
  pb::put_varint(s, 300);
  EXPECT_EQ(s, std::string("\xac\x02", 2));
  s.clear();
  pb::put_int64(s, 2, 1);
  EXPECT_EQ(s, std::string("\x10\x01", 2));
}

TEST(EventFile, ScalarsAndTextRoundTripWithCrcs) {
  const std::string dir = summary_dir(tmpdir("ev"), SummaryKind::kTrainingEval, "wmt_t2t");
  EXPECT_NE(dir.find("training_eval/wmt_t2t"), std::string::npos);
  std::string path;
  {
    EventFileWriter w(dir);
    path = w.path();
    w.add_scalar("loss", 2.5f, 10, 1000.5);
    w.add_scalars({{"accuracy", 0.75}, {"timing/seqs_per_second", 123.0}}, 20, 1001.0);
    w.add_text("config", "num_layers = 2", 0, 1002.0);
    w.close();
  }
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u);
  auto recs = read_tfrecords(path);
  ASSERT_EQ(recs.size(), 4u);
  ParsedEvent e0 = parse_event(recs[0]);
  EXPECT_EQ(e0.file_version, "brain.Event:2");
  ParsedEvent e1 = parse_event(recs[1]);
  EXPECT_EQ(e1.step, 10);
  EXPECT_EQ(e1.wall_time, 1000.5);
  ASSERT_EQ(e1.scalars.size(), 1u);
  EXPECT_EQ(e1.scalars[0], (std::pair<std::string, float>{"loss", 2.5f}));
  ParsedEvent e2 = parse_event(recs[2]);
  ASSERT_EQ(e2.scalars.size(), 2u);
  EXPECT_EQ(e2.scalars[1].first, "timing/seqs_per_second");
  EXPECT_EQ(e2.scalars[1].second, 123.f);
  ParsedEvent e3 = parse_event(recs[3]);
  ASSERT_EQ(e3.texts.size(), 1u);
  EXPECT_EQ(e3.texts[0].second, "num_layers = 2");

  // Flip one data byte of the second record: its data CRC must fail.
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const size_t off = 16 + recs[0].size() + 12 + 3;
  f.seekg(off);
  char c;
  f.read(&c, 1);
  c ^= 0x40;
  f.seekp(off);
  f.write(&c, 1);
  f.close();
  try {
    read_tfrecords(path);
    FAIL();
  } catch (const SummaryError& e) {
    EXPECT_NE(std::string(e.what()).find("data CRC mismatch in record at offset " +
                                         std::to_string(16 + recs[0].size())),
              std::string::npos)
        << e.what();
  }
}

TEST(EventFile, TruncatedRecordIsReported) {
  const std::string dir = tmpdir("trunc");
  std::string path;
  {
    EventFileWriter w(dir);
    w.add_scalar("loss", 1.f, 1);
    path = w.path();
  }
  fs::resize_file(path, fs::file_size(path) - 3);
  EXPECT_THROW(read_tfrecords(path), SummaryError);
}

TEST(MetricsJsonl, OneObjectPerLineWithStep) {
  const std::string path = tmpdir("jsonl") + "/inference_eval/glue_cola-metrics.jsonl";
  {
    MetricsJsonlWriter w(path);
    w.write(100, {{"accuracy", 0.5}, {"loss", std::nan("")}});
    w.write(200, {{"accuracy", 0.625}});
  }
  std::ifstream in(path);
  std::string l1, l2, l3;
  std::getline(in, l1);
  std::getline(in, l2);
  EXPECT_FALSE(std::getline(in, l3));
  auto j1 = nlohmann::json::parse(l1), j2 = nlohmann::json::parse(l2);
  EXPECT_EQ(j1["step"], 100);
  EXPECT_EQ(j1["accuracy"], 0.5);
  EXPECT_EQ(j1["loss"], "NaN");
  EXPECT_EQ(j2["step"], 200);
}

}  // namespace
}  // namespace t5x
