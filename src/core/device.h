// Device: where an array's buffer lives (core/allocator.h allocates per device).
#pragma once
#include <cstdint>
#include <string>

namespace t5x {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string to_string() const;  // "cpu:0"
};

}  // namespace t5x
