// An Orbax checkpoint's OCDBT store (checkpoints/ocdbt.h) as `t5x` opens it.
// Every manifest and node carries a CRC-32C that random bytes never match, so
// the harness wraps the input's parts in valid envelopes to reach the
// decoders: the input is a manifest body, the separator "\xff\xfe\xfd\xfc",
// and B+tree node bodies separated the same way. The manifest is written to
// manifest.ocdbt; the nodes, each in its envelope (18 bytes around the body),
// one after the other to d/0. Every key's value is then read.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "t5x/checkpoints/crc32c.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/ocdbt.h"

namespace {
std::string envelope(uint32_t magic, std::string_view body) {
  std::string e;
  for (int i = 3; i >= 0; --i) e += char((magic >> (8 * i)) & 0xff);
  const uint64_t length = 4 + 8 + 2 + body.size() + 4;
  for (int i = 0; i < 8; ++i) e += char((length >> (8 * i)) & 0xff);
  e += '\0';  // version 0
  e += '\0';  // uncompressed
  e += body;
  const uint32_t crc = t5x::checksum::crc32c(e.data(), e.size());
  for (int i = 0; i < 4; ++i) e += char((crc >> (8 * i)) & 0xff);
  return e;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = t5x_fuzz::scratch_dir() + "/store";
  std::filesystem::create_directories(dir + "/d");
  std::vector<std::string_view> parts;
  std::string_view in = t5x_fuzz::as_text(data, size);
  constexpr std::string_view sep("\xff\xfe\xfd\xfc", 4);
  for (size_t at; (at = in.find(sep)) != std::string_view::npos; in.remove_prefix(at + sep.size()))
    parts.push_back(in.substr(0, at));
  parts.push_back(in);
  t5x_fuzz::write_file(dir + "/manifest.ocdbt", envelope(0x0cdb3a2a, parts[0]));
  std::string nodes;
  for (size_t i = 1; i < parts.size(); ++i) nodes += envelope(0x0cdb20de, parts[i]);
  t5x_fuzz::write_file(dir + "/d/0", nodes);
  try {
    const auto store = t5x::OcdbtStore::open(dir);
    for (const auto& k : store.keys()) (void)store.read(k);
  } catch (const t5x::CheckpointError&) {
  }
  return 0;
}
