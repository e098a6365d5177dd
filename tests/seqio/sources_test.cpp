// DataSources: formats, file listing, and error messages with file/line/offset.
#include "seqio/sources.h"

#include <gtest/gtest.h>

#include "seqio/errors.h"
#include "seqio/tfrecord.h"
#include "test_util.h"

namespace seqio {
namespace {

using testing::TempDir;
using Patterns = std::map<std::string, std::vector<std::string>>;

std::vector<Example> read_all(const DataSource& src, const std::string& split) {
  std::vector<Example> out;
  auto files = src.list_shards(split);
  for (size_t i = 0; i < files.size(); ++i) {
    auto r = src.open_shard(split, i);
    Example ex;
    while (r->next(ex)) out.push_back(ex);
  }
  return out;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const DataError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ListFiles, GlobsSortedDedupedVerbatimKept) {
  TempDir d("list");
  d.write("b.txt", "x\n");
  d.write("a.txt", "x\n");
  d.write("c.dat", "x\n");
  auto files = list_files({d.file("*.txt"), d.file("a.txt"), d.file("c.dat")});
  EXPECT_EQ(files, (std::vector<std::string>{d.file("a.txt"), d.file("b.txt"), d.file("c.dat")}));
  EXPECT_NE(error_of([&] { list_files({d.file("*.none")}); }).find("No file is found"), std::string::npos);
}

TEST(TextLineDataSource, LinesKeepEmptyAndSkipHeader) {
  TempDir d("text");
  d.write("a.txt", "header\nfirst\n\nthird\n");
  TextLineDataSource src(Patterns{{"train", {d.file("a.txt")}}}, /*skip_header_lines=*/1);
  auto exs = read_all(src, "train");
  ASSERT_EQ(exs.size(), 3u);
  EXPECT_EQ(get_text(exs[0], "text"), "first");
  EXPECT_EQ(get_text(exs[1], "text"), "");
  EXPECT_EQ(get_text(exs[2], "text"), "third");
}

TEST(TextLineDataSource, InvalidUtf8NamesFileAndLine) {
  TempDir d("utf8");
  d.write("bad.txt", "good\nb\xC3(d\n");
  TextLineDataSource src(Patterns{{"train", {d.file("bad.txt")}}});
  auto msg = error_of([&] { read_all(src, "train"); });
  EXPECT_NE(msg.find(d.file("bad.txt") + ":2: invalid UTF-8 at column 2"), std::string::npos) << msg;
}

TEST(JsonlDataSource, TypedFields) {
  TempDir d("jsonl");
  d.write("a.jsonl", R"({"text": "hello", "id": 7, "score": 0.5, "ids": [3, 4], "extra": true})" "\n");
  JsonlDataSource src(Patterns{{"train", {d.file("a.jsonl")}}},
                      {{"text", DType::kString}, {"id", DType::kInt64}, {"score", DType::kFloat64}, {"ids", DType::kInt32}});
  auto exs = read_all(src, "train");
  ASSERT_EQ(exs.size(), 1u);
  EXPECT_EQ(get_text(exs[0], "text"), "hello");
  EXPECT_EQ(std::get<int64_t>(exs[0].at("id")), 7);
  EXPECT_EQ(std::get<double>(exs[0].at("score")), 0.5);
  EXPECT_EQ(get_tokens(exs[0], "ids"), (Tokens{3, 4}));
  EXPECT_EQ(exs[0].count("extra"), 0u);
}

TEST(JsonlDataSource, ErrorsNameFileAndLine) {
  TempDir d("jsonl_err");
  auto src_for = [&](const std::string& name, const std::string& content) {
    d.write(name, content);
    return JsonlDataSource(Patterns{{"train", {d.file(name)}}}, {{"text", DType::kString}});
  };
  auto missing = src_for("m.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"txt\": \"c\"}\n");
  auto msg = error_of([&] { read_all(missing, "train"); });
  EXPECT_NE(msg.find(d.file("m.jsonl") + ":3: missing field 'text'"), std::string::npos) << msg;
  auto empty = src_for("e.jsonl", "{\"text\": \"a\"}\n\n{\"text\": \"b\"}\n");
  msg = error_of([&] { read_all(empty, "train"); });
  EXPECT_NE(msg.find(d.file("e.jsonl") + ":2: empty line"), std::string::npos) << msg;
  auto bad = src_for("b.jsonl", "{\"text\": \"a\"\n");
  msg = error_of([&] { read_all(bad, "train"); });
  EXPECT_NE(msg.find(d.file("b.jsonl") + ":1: invalid JSON"), std::string::npos) << msg;
  // Found by jsonl_fuzzer: a number past double's range is nlohmann's
  // out_of_range, not a parse_error, and escaped the reader.
  auto huge = src_for("h.jsonl", "{\"text\": \"a\", \"n\": 1" + std::string(400, '0') + "}\n");
  msg = error_of([&] { read_all(huge, "train"); });
  EXPECT_NE(msg.find(d.file("h.jsonl") + ":1: invalid JSON"), std::string::npos) << msg;
  auto type = src_for("t.jsonl", "{\"text\": 5}\n");
  msg = error_of([&] { read_all(type, "train"); });
  EXPECT_NE(msg.find(":1: field 'text' is an integer, expected string"), std::string::npos) << msg;
  auto utf = src_for("u.jsonl", "{\"text\": \"\xFF\"}\n");
  msg = error_of([&] { read_all(utf, "train"); });
  EXPECT_NE(msg.find(d.file("u.jsonl") + ":1: invalid UTF-8"), std::string::npos) << msg;
}

TEST(TsvDataSource, ColumnsAndErrors) {
  TempDir d("tsv");
  d.write("a.tsv", "q\ta\nwhat\tthat\n");
  TsvDataSource src(Patterns{{"train", {d.file("a.tsv")}}}, {"inputs", "targets"}, /*skip_header_lines=*/1);
  auto exs = read_all(src, "train");
  ASSERT_EQ(exs.size(), 1u);
  EXPECT_EQ(get_text(exs[0], "inputs"), "what");
  EXPECT_EQ(get_text(exs[0], "targets"), "that");
  d.write("b.tsv", "one\ttwo\nthree\n");
  TsvDataSource bad(Patterns{{"train", {d.file("b.tsv")}}}, {"inputs", "targets"});
  auto msg = error_of([&] { read_all(bad, "train"); });
  EXPECT_NE(msg.find(d.file("b.tsv") + ":2: expected 2 tab-separated columns, found 1"), std::string::npos) << msg;
  // A UTF-8 byte order mark starting the file is not part of the first field
  // (only there: one inside a later line is text).
  d.write("bom.tsv", "\xEF\xBB\xBFwhat\tthat\n\xEF\xBB\xBFx\ty\n");
  TsvDataSource bom(Patterns{{"train", {d.file("bom.tsv")}}}, {"inputs", "targets"});
  exs = read_all(bom, "train");
  ASSERT_EQ(exs.size(), 2u);
  EXPECT_EQ(get_text(exs[0], "inputs"), "what");
  EXPECT_EQ(get_text(exs[1], "inputs"), "\xEF\xBB\xBFx");
}

TEST(TFRecord, Crc32cKnownAnswers) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // CRC-32C check value (RFC 3720)
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4
}

// tests/data/seqio/tf_examples.tfrecord was written by TensorFlow
// (scripts/golden/seqio_vocab_tfrecord.py).
TEST(TFExampleDataSource, ReadsTensorFlowWrittenFile) {
  TFExampleDataSource src(Patterns{{"train", {"tests/data/seqio/tf_examples.tfrecord"}}},
                          {{"text", DType::kString}, {"ids", DType::kInt32}, {"label", DType::kInt64},
                           {"weight", DType::kFloat64}});
  auto exs = read_all(src, "train");
  ASSERT_EQ(exs.size(), 3u);
  EXPECT_EQ(get_text(exs[0], "text"), "This program is free software");
  EXPECT_EQ(get_tokens(exs[0], "ids"), (Tokens{5, 6, 7}));
  EXPECT_EQ(std::get<int64_t>(exs[1].at("label")), -2);
  EXPECT_EQ(get_tokens(exs[1], "ids"), (Tokens{}));
  EXPECT_FLOAT_EQ(std::get<double>(exs[2].at("weight")), 0.25);
  EXPECT_EQ(get_text(exs[2], "text"), "caf\xC3\xA9 \xE2\x82\xAC");
  EXPECT_EQ(get_tokens(exs[2], "ids"), (Tokens{1, 300000, 2}));
}

TEST(TFExampleDataSource, RoundTripAndCorruptionOffsets) {
  TempDir d("tfrec");
  const std::string path = d.file("x.tfrecord");
  {
    TFRecordWriter w(path);
    for (int i = 0; i < 3; ++i)
      w.write(example_to_tf_example(Example{{"ids", Tokens{i, i + 1}}, {"text", std::string("row ") + char('a' + i)}}));
    w.close();
  }
  TFExampleDataSource src(Patterns{{"train", {path}}});
  auto exs = read_all(src, "train");
  ASSERT_EQ(exs.size(), 3u);
  EXPECT_EQ(get_tokens(exs[2], "ids"), (Tokens{2, 3}));
  EXPECT_EQ(get_text(exs[1], "text"), "row b");
  // Flip one byte inside the data of the second record.
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  TFRecordReader probe(path);
  std::string rec;
  probe.next(rec);
  const uint64_t second = probe.offset();
  bytes[second + 12 + 3] ^= 0x20;
  std::ofstream(path, std::ios::binary) << bytes;
  auto msg = error_of([&] { read_all(src, "train"); });
  EXPECT_NE(msg.find(path + "@byte " + std::to_string(second) + ": TFRecord data CRC mismatch"), std::string::npos)
      << msg;
  // Truncation.
  std::ofstream(path, std::ios::binary) << bytes.substr(0, second + 5);
  msg = error_of([&] { read_all(src, "train"); });
  EXPECT_NE(msg.find("@byte " + std::to_string(second) + ": truncated TFRecord header"), std::string::npos) << msg;
}

// A record length with a valid CRC but past the end of the file (1 GiB in a
// 12-byte file) is an error before anything is allocated for it; lengths up
// to 16 GiB used to be allocated first (fuzz/tfrecord_fuzzer's limits).
TEST(TFRecord, LengthPastTheEndOfTheFileIsNotAllocated) {
  TempDir d("tfrec_len");
  const std::string path = d.file("x.tfrecord");
  std::string head;
  for (int i = 0; i < 8; ++i) head += char(((uint64_t{1} << 30) >> (8 * i)) & 0xff);
  const uint32_t crc = masked_crc32c(head);
  for (int i = 0; i < 4; ++i) head += char((crc >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << head;
  TFRecordReader r(path);
  std::string rec;
  EXPECT_EQ(error_of([&] { r.next(rec); }),
            path + "@byte 0: TFRecord length 1073741824 runs past the end of the file (0 bytes left after the "
                   "header; truncated or corrupt file)");
}

TEST(InMemoryDataSource, OneShardPerSplit) {
  InMemoryDataSource src({{"train", {Example{{"a", int64_t{1}}}, Example{{"a", int64_t{2}}}}}});
  EXPECT_EQ(src.list_shards("train").size(), 1u);
  EXPECT_EQ(src.num_input_examples("train"), 2);
  EXPECT_EQ(read_all(src, "train").size(), 2u);
  EXPECT_THROW(src.list_shards("test"), DataError);
}

}  // namespace
}  // namespace seqio
