// CRC-32C (Castagnoli; reflected polynomial 0x82F63B78, RFC 3720 B.4), the
// checksum of the checkpoint manifest (manifest.h) and of TensorFlow's
// TensorBundle entries (tf_bundle.h). crc32c("123456789") == 0xE3069283.
//
// Written here because Debian packages no C or C++ CRC-32C library
// (`apt-cache search crc32c` finds only python3-crc32c; LevelDB keeps its
// crc32c in a private header). x86-64 CPUs with SSE4.2 use the crc32
// instruction, others a slicing-by-8 table: 4.7 and 0.8 GB/s on one core of
// the development machine (a Xeon with AMX). Both give the same value.
#pragma once
#include <cstddef>
#include <cstdint>

namespace t5x::checksum {

// The CRC of data[0, n), extended from `crc` (0 to start): crc32c(b, crc32c(a))
// is the CRC of a followed by b.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
// The portable table version (the oracle of the tests).
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);

}  // namespace t5x::checksum
