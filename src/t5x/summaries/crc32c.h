// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and TFRecord's masked
// form: ((crc >> 15) | (crc << 17)) + 0xa282ead8 (tensorflow/core/lib/hash/crc32c.h).
#pragma once
#include <cstddef>
#include <cstdint>

namespace t5x {

uint32_t crc32c(const void* data, size_t n, uint32_t init = 0);
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc32c(uint32_t m) {
  uint32_t rot = m - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace t5x
