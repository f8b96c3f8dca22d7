// sparsevit's checkpoint container: one file holding a model's tensors, the counters of the run
// that wrote it (epoch, global step, host generator state), free-form JSON metadata, and named
// sections a trainer adds (optimizer, EMA: nested archives; torch's generator: a buffer). This
// layer knows the file format only; what the sections mean is train/checkpoint.h's business, and
// what the metadata says about the model is models/model_description.h's.
//
// File layout: a 32-byte header ("SVCKPT01", payload size, 64-bit checksum of the payload,
// reserved) followed by a torch::serialize archive (PyTorch zip). The checksum turns truncated
// or corrupted files into a clear RuntimeError instead of garbage weights.
//
// Writes are atomic (util/atomic_file.h): a uniquely named temporary in the same folder, fsynced,
// renamed over <path>; on any failure the temporary is removed and an existing <path> is untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/serialize/archive.h>

#include "weights/named_tensors.h"

namespace sparsevit::weights {

// The container's own fields.
struct CheckpointRecord {
  int64_t epoch = 0;                 // the trainer's convention; MAE saves the finished epoch and resumes at +1
  int64_t global_step = 0;           // optimizer steps taken
  std::string host_rng_state;        // "" : none
  std::string metadata_json = "{}";  // any JSON text (must parse)
};

// A nested archive written after the model tensors, in the order given.
struct CheckpointSection {
  std::string name;
  std::function<void(torch::serialize::OutputArchive&)> write;
};

// The header's checksum of a payload (what a writer of the format, or a fuzzer, must compute).
uint64_t checkpoint_payload_checksum(const void* data, std::size_t size);

// Writes atomically (see above): the record, `model`, then `sections`, then `buffers` (tensors
// stored under their names). Throws RuntimeError "checkpoint PATH: ..." on failure (the old
// file, if any, stays intact) and UsageError when the metadata is not JSON.
void write_checkpoint_file(const std::string& path, const CheckpointRecord& record, const NamedTensors& model,
                           const std::vector<CheckpointSection>& sections = {},
                           const NamedTensors& buffers = {});

// A checkpoint file read and verified (header, size, checksum, format marker and version) by its
// constructor, which throws RuntimeError "checkpoint PATH: ..." on a missing, truncated, corrupt
// or foreign file. Sections are read on demand.
class CheckpointFile {
 public:
  explicit CheckpointFile(std::string path);

  const std::string& path() const { return path_; }
  const CheckpointRecord& record() const { return record_; }
  int64_t epoch() const { return record_.epoch; }
  int64_t global_step() const { return record_.global_step; }
  const std::string& metadata_json() const { return record_.metadata_json; }
  const std::string& host_rng_state() const { return record_.host_rng_state; }  // "" when none was saved
  // The saved model tensors (CPU), in saved order.
  const NamedTensors& model_tensors() const { return model_; }

  bool has_section(const std::string& name) const;
  // Reads section `name` into `archive` (RuntimeError when it is absent or unreadable).
  void read_section(const std::string& name, torch::serialize::InputArchive& archive) const;
  // The buffer saved under `name`; undefined when the file has none.
  at::Tensor buffer(const std::string& name) const;

 private:
  std::string path_;
  CheckpointRecord record_;
  NamedTensors model_;
  mutable torch::serialize::InputArchive archive_;
};

// First line of an exception's message (LibTorch's carry backtraces after it).
std::string first_line(const std::exception& error);

}  // namespace sparsevit::weights
