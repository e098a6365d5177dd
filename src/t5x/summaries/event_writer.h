// TensorBoard event files, written the way tf.summary / CLU write them:
// `<log_dir>/events.out.tfevents.<unix_seconds>.<hostname>[suffix]`, a TFRecord
// stream (u64 length | masked crc32c(length) | data | masked crc32c(data))
// of tensorflow.Event protos. The first record carries
// file_version "brain.Event:2"; scalars use Summary.Value.simple_value, text
// uses a DT_STRING tensor with plugin "text". The protobuf wire format is
// encoded by hand (fields of tensorflow/core/util/event.proto and
// tensorflow/core/framework/summary.proto).
//
// t5x layout (t5x.md §8): MODEL_DIR/train, MODEL_DIR/training_eval/<task>,
// MODEL_DIR/inference_eval; see summary_dir().
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace t5x {

class SummaryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class SummaryKind { kTrain, kTrainingEval, kInferenceEval };
// MODEL_DIR/train, MODEL_DIR/training_eval/<task>, MODEL_DIR/inference_eval.
std::string summary_dir(const std::string& model_dir, SummaryKind kind, const std::string& task = "");

double wall_time_now();

class EventFileWriter {
 public:
  // Creates log_dir and the event file, then writes the file_version record.
  // Throws SummaryError if the file cannot be created.
  explicit EventFileWriter(const std::string& log_dir, const std::string& filename_suffix = "");
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  void add_scalar(const std::string& tag, float value, int64_t step, double wall_time = -1);
  void add_scalars(const std::map<std::string, double>& values, int64_t step, double wall_time = -1);
  void add_text(const std::string& tag, const std::string& text, int64_t step, double wall_time = -1);
  void flush();  // fflush + fsync
  void close();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* f_ = nullptr;
};

// ---- Readers (for tests and tools) ----

// Reads every TFRecord, checking both CRCs. Throws SummaryError naming the
// file and byte offset of a bad length, CRC or truncated record.
std::vector<std::string> read_tfrecords(const std::string& path);

struct ParsedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> scalars;       // simple_value
  std::vector<std::pair<std::string, std::string>> texts;   // text plugin tensors
};
ParsedEvent parse_event(const std::string& bytes);

// Protobuf wire-format helpers (exposed for tests).
namespace pb {
void put_varint(std::string& out, uint64_t v);
void put_tag(std::string& out, int field, int wire_type);
void put_bytes(std::string& out, int field, const std::string& bytes);
void put_double(std::string& out, int field, double v);
void put_float(std::string& out, int field, float v);
void put_int64(std::string& out, int field, int64_t v);
}  // namespace pb

}  // namespace t5x
