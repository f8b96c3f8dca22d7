// safetensors (the format timm and Hugging Face publish): an 8-byte little-endian header length,
// a JSON header {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the tensors' bytes. Read with every field checked; written atomically.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "train/named_tensors.h"

namespace sparsevit::weights {

struct SafetensorsContents {
  train::NamedTensors tensors;                // in the file's data order, contiguous CPU copies
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Parses a whole file's bytes; RuntimeError "<source>: <reason>" on anything malformed: short
// file, header length beyond the file or over 100 MB, header not a JSON object, a missing or
// mistyped field, an unknown dtype, a shape whose size overflows, offsets out of order, outside
// the data or not matching the shape, overlapping tensors, duplicate names.
SafetensorsContents parse_safetensors(std::string_view bytes, const std::string& source);
SafetensorsContents read_safetensors(const std::string& path);

// Writes tensors (CPU; F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL) with `metadata`, header padded
// with spaces to a multiple of 8 bytes as the reference writer does. UsageError for an unsupported
// dtype or a duplicate name.
void write_safetensors(const std::string& path, const train::NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sparsevit::weights
