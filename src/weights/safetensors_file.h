// safetensors (https://github.com/huggingface/safetensors), the format timm publishes: an 8-byte
// little-endian header length N, N bytes of JSON ({"name": {"dtype", "shape", "data_offsets"}},
// optional "__metadata__": string -> string), then the data buffer the offsets index.
// Reading copies every tensor out of the buffer (contiguous CPU tensors owning their memory) and
// checks every field first, so a hostile or damaged file is a one-line RuntimeError, never a crash
// or an out-of-bounds read. Data is little-endian (the format's rule; every supported host is).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "weights/named_tensors.h"

namespace sparsevit::weights {

struct SafetensorsContents {
  weights::NamedTensors tensors;                  // in the file's data order (by begin offset)
  std::map<std::string, std::string> metadata;  // "__metadata__", empty when absent
};

// Limits: a header of at most 100 MB, at most 64 dimensions per tensor.
constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1000 * 1000;

// `bytes` is a whole file; errors are RuntimeError("<source>: why").
SafetensorsContents parse_safetensors(std::string_view bytes, const std::string& source);

// Reads and parses `path` (a missing or unreadable file is a RuntimeError naming it).
SafetensorsContents read_safetensors(const std::string& path);

// Writes `tensors` (CPU, supported dtype, unique non-empty names) in the given order, with a
// space-padded header whose length is a multiple of 8, as the reference writer does. Atomic
// (util/atomic_file.h). UsageError for tensors it cannot represent; RuntimeError on I/O failure.
void write_safetensors(const std::string& path, const weights::NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sparsevit::weights
