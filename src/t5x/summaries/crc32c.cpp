#include "t5x/summaries/crc32c.h"

#include <array>

namespace t5x {

namespace {
std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t init) {
  static const std::array<uint32_t, 256> table = make_table();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~init;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

}  // namespace t5x
