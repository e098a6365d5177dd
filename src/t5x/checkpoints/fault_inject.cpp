#include "t5x/checkpoints/fault_inject.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace t5x {
namespace {

constexpr std::array<std::string_view, 5> kPoints = {"train_step", "save_chunks", "save_before_rename",
                                                     "save_after_rename", "eval"};

struct Fault {
  std::string point;
  int64_t step = 0;
  int rank = -1;  // -1: every process
};

int64_t parse_int(const std::string& s, const std::string& item) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    throw std::invalid_argument("T5X_FAULT_INJECT: '" + item + "' is not <point>:<step>[@<rank>]");
  return v;
}

std::vector<Fault> parse(const char* env) {
  std::vector<Fault> out;
  std::string text = env;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':'), at = item.find('@');
    if (colon == std::string::npos)
      throw std::invalid_argument("T5X_FAULT_INJECT: '" + item + "' is not <point>:<step>[@<rank>]");
    Fault f;
    f.point = item.substr(0, colon);
    if (std::find(kPoints.begin(), kPoints.end(), f.point) == kPoints.end())
      throw std::invalid_argument("T5X_FAULT_INJECT: unknown point '" + f.point +
                                  "'; points: train_step, save_chunks, save_before_rename, save_after_rename, eval");
    f.step = parse_int(item.substr(colon + 1, at == std::string::npos ? std::string::npos : at - colon - 1), item);
    if (at != std::string::npos) f.rank = int(parse_int(item.substr(at + 1), item));
    out.push_back(f);
  }
  return out;
}

int own_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) return std::atoi(r);
  return 0;
}

}  // namespace

namespace {
struct Faults {
  std::vector<Fault> faults;
  int rank = 0;
};

// Parsed once (a malformed value throws, and is parsed again next time).
const Faults& faults() {
  static std::once_flag once;
  static Faults f;
  std::call_once(once, [] {
    if (const char* env = std::getenv("T5X_FAULT_INJECT")) f.faults = parse(env);
    f.rank = own_rank();
  });
  return f;
}
}  // namespace

void check_fault_injection() { (void)faults(); }

void fault_point(std::string_view point, int64_t step) {
  const Faults& s = faults();
  for (const auto& f : s.faults)
    if (f.point == point && f.step == step && (f.rank < 0 || f.rank == s.rank)) ::kill(::getpid(), SIGKILL);
}

}  // namespace t5x
