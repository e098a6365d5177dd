// Hugging Face safetensors files (https://github.com/huggingface/safetensors,
// format description in its README):
//   u64 little-endian N | N bytes of JSON header | byte buffer
// header = {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
//           ..., "__metadata__": {"<str>": "<str>"}}
// Offsets are relative to the byte buffer and must tile it exactly (no gaps,
// no overlaps). The writer pads the header with spaces to a multiple of 8.
// dtypes: F32 BF16 F16 F64 I8 I16 I32 I64 U8 BOOL <-> numpy names.
#pragma once
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "t5x/checkpoints/host_tensor.h"

namespace t5x {

using NamedTensors = std::vector<std::pair<std::string, HostTensor>>;

struct SafetensorsFile {
  NamedTensors tensors;                         // in file-offset order
  std::map<std::string, std::string> metadata;  // "__metadata__"
  const HostTensor* find(const std::string& name) const;
};

std::string safetensors_dtype(const std::string& numpy_name);  // "float32" -> "F32"
std::string numpy_dtype_from_safetensors(const std::string& st, const std::string& where);

// Throws std::invalid_argument "[safetensors] ..." for duplicate names or
// tensors whose bytes do not match their shape.
std::vector<uint8_t> encode_safetensors(const NamedTensors& tensors,
                                        const std::map<std::string, std::string>& metadata = {});
// Validates everything: header length vs file size, JSON, dtype names,
// offsets in range, sizes vs shapes, overlaps and gaps. Throws CheckpointError
// "<where>: ..." with the tensor name and offsets involved.
SafetensorsFile decode_safetensors(std::span<const uint8_t> bytes, const std::string& where);

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace t5x
