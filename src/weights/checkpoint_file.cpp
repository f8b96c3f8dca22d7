#include "weights/checkpoint_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::weights {

namespace {

constexpr char kMagic[8] = {'S', 'V', 'C', 'K', 'P', 'T', '0', '1'};
constexpr size_t kHeaderSize = 32;
constexpr int64_t kFormatVersion = 1;
const char* const kFormatName = "sparsevit-checkpoint";

// FNV-1a-style 64-bit checksum over 64-bit words (8x faster than bytewise FNV), streaming.
class Checksum {
 public:
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    while (n > 0 && pending_ > 0) {
      buf_[pending_++] = *p++;
      --n;
      if (pending_ == 8) {
        mix_word(buf_.data());
        pending_ = 0;
      }
    }
    for (; n >= 8; n -= 8, p += 8) mix_word(p);
    while (n-- > 0) buf_[pending_++] = *p++;
  }
  uint64_t digest() const {
    uint64_t h = h_;
    for (size_t i = 0; i < pending_; ++i) h = (h ^ buf_[i]) * kPrime;
    h = (h ^ total_) * kPrime;
    return h ^ (h >> 29);
  }

 private:
  static constexpr uint64_t kPrime = 0x100000001b3ULL;
  void mix_word(const unsigned char* p) {
    uint64_t w = 0;
    for (int i = 7; i >= 0; --i) w = (w << 8) | p[i];  // little-endian, on every host
    h_ = (h_ ^ w) * kPrime;
    h_ ^= h_ >> 32;
  }
  uint64_t h_ = 0xcbf29ce484222325ULL;
  uint64_t total_ = 0;
  std::array<unsigned char, 8> buf_{};
  size_t pending_ = 0;
};

void put_u64(unsigned char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_u64(const unsigned char* in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

std::string first_line(const std::exception& e) {
  std::string s;
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) {
    s = c10e->what_without_backtrace();
  } else {
    s = e.what();
  }
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

uint64_t checkpoint_payload_checksum(const void* data, size_t size) {
  Checksum checksum;
  checksum.update(data, size);
  return checksum.digest();
}

void write_checkpoint_file(const std::string& path, const CheckpointRecord& record, const NamedTensors& model_tensors,
                           const std::vector<CheckpointSection>& sections, const NamedTensors& buffers) {
  const std::string context = "checkpoint " + path;
  if (!nlohmann::json::accept(record.metadata_json)) throw UsageError(context + ": metadata is not valid JSON");

  torch::serialize::OutputArchive root;
  try {
    root.write("format", c10::IValue(std::string(kFormatName)));
    root.write("format_version", c10::IValue(kFormatVersion));
    root.write("epoch", c10::IValue(record.epoch));
    root.write("global_step", c10::IValue(record.global_step));
    root.write("metadata_json", c10::IValue(record.metadata_json));
    root.write("host_rng_state", c10::IValue(record.host_rng_state));
    torch::serialize::OutputArchive model(root.compilation_unit());
    write_named(model, model_tensors);
    root.write("model", model);
    for (const CheckpointSection& section : sections) {
      torch::serialize::OutputArchive nested(root.compilation_unit());
      section.write(nested);
      root.write(section.name, nested);
    }
    for (const auto& [name, tensor] : buffers) root.write(name, tensor, /*is_buffer=*/true);
  } catch (const c10::Error& e) {
    throw RuntimeError(context + ": cannot serialise: " + first_line(e));
  }

  AtomicFile file(path);
  unsigned char header[kHeaderSize] = {};
  file.write(header, kHeaderSize);
  Checksum checksum;
  uint64_t payload = 0;
  std::string write_error;
  try {
    root.save_to([&](const void* data, size_t n) -> size_t {
      if (!write_error.empty()) return 0;
      try {
        file.write(data, n);
      } catch (const RuntimeError& e) {
        write_error = e.what();
        return 0;
      }
      checksum.update(data, n);
      payload += n;
      return n;
    });
  } catch (const std::exception& e) {
    throw RuntimeError(context + ": " + (write_error.empty() ? "cannot serialise: " + first_line(e) : write_error));
  }
  if (!write_error.empty()) throw RuntimeError(context + ": " + write_error);
  std::memcpy(header, kMagic, 8);
  put_u64(header + 8, payload);
  put_u64(header + 16, checksum.digest());
  try {
    file.write_at(0, header, kHeaderSize);
    file.commit();
  } catch (const RuntimeError& e) {
    throw RuntimeError(context + ": " + e.what());
  }
}

CheckpointFile::CheckpointFile(std::string path) : path_(std::move(path)) {
  const std::string context = "checkpoint " + path_;
  auto file = std::make_shared<std::ifstream>(path_, std::ios::binary);
  if (!*file) {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) throw RuntimeError(context + ": no such file");
    throw RuntimeError(context + ": cannot open: " + errno_text(errno));
  }
  file->seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(file->tellg());
  file->seekg(0);
  unsigned char header[kHeaderSize];
  if (file_size < kHeaderSize || !file->read(reinterpret_cast<char*>(header), kHeaderSize)) {
    throw RuntimeError(context + ": truncated (" + std::to_string(file_size) + " bytes, smaller than its header)");
  }
  if (std::memcmp(header, kMagic, 8) != 0) {
    throw RuntimeError(context + ": not a sparsevit checkpoint (unknown header)");
  }
  const uint64_t payload = get_u64(header + 8);
  const uint64_t expected_sum = get_u64(header + 16);
  if (file_size - kHeaderSize < payload) {
    throw RuntimeError(context + ": truncated (" + std::to_string(file_size) + " bytes, expected " +
                       std::to_string(payload + kHeaderSize) + ")");
  }
  if (file_size - kHeaderSize > payload) {
    throw RuntimeError(context + ": corrupt (" + std::to_string(file_size - kHeaderSize - payload) +
                       " unexpected bytes after the data)");
  }
  Checksum checksum;
  std::vector<char> chunk(1 << 20);
  for (uint64_t left = payload; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    if (!file->read(chunk.data(), static_cast<std::streamsize>(n))) throw RuntimeError(context + ": read error");
    checksum.update(chunk.data(), n);
    left -= n;
  }
  if (checksum.digest() != expected_sum) throw RuntimeError(context + ": corrupt (checksum mismatch)");

  try {
    file->clear();
    archive_.load_from(
        [file](uint64_t pos, void* buf, size_t n) -> size_t {
          file->clear();
          file->seekg(static_cast<std::streamoff>(kHeaderSize + pos));
          file->read(static_cast<char*>(buf), static_cast<std::streamsize>(n));
          return static_cast<size_t>(file->gcount());
        },
        [payload]() -> size_t { return static_cast<size_t>(payload); }, torch::Device(torch::kCPU));

    c10::IValue v;
    if (!archive_.try_read("format", v) || !v.isString() || v.toStringRef() != kFormatName) {
      throw RuntimeError(context + ": not a sparsevit checkpoint (no format marker)");
    }
    archive_.read("format_version", v);
    if (!v.isInt() || v.toInt() > kFormatVersion) {
      throw RuntimeError(context + ": written by a newer sparsevit (format version " +
                         (v.isInt() ? std::to_string(v.toInt()) : std::string("?")) + ")");
    }
    archive_.read("epoch", v);
    record_.epoch = v.toInt();
    archive_.read("global_step", v);
    record_.global_step = v.toInt();
    archive_.read("metadata_json", v);
    record_.metadata_json = v.toStringRef();
    archive_.read("host_rng_state", v);
    record_.host_rng_state = v.toStringRef();
    torch::serialize::InputArchive model;
    if (!archive_.try_read("model", model)) throw RuntimeError(context + ": holds no model state");
    model_ = read_named(model, context);
  } catch (const RuntimeError&) {
    throw;
  } catch (const std::exception& e) {
    throw RuntimeError(context + ": unreadable: " + first_line(e));
  }
}

bool CheckpointFile::has_section(const std::string& name) const {
  torch::serialize::InputArchive probe;
  try {
    return archive_.try_read(name, probe);
  } catch (const std::exception& e) {
    throw RuntimeError("checkpoint " + path_ + ": unreadable: " + first_line(e));
  }
}

void CheckpointFile::read_section(const std::string& name, torch::serialize::InputArchive& archive) const {
  const std::string context = "checkpoint " + path_;
  bool found = false;
  try {
    found = archive_.try_read(name, archive);
  } catch (const std::exception& e) {
    throw RuntimeError(context + ": unreadable " + name + ": " + first_line(e));
  }
  if (!found) throw RuntimeError(context + ": holds no " + name + " state");
}

at::Tensor CheckpointFile::buffer(const std::string& name) const {
  at::Tensor tensor;
  try {
    if (!archive_.try_read(name, tensor, /*is_buffer=*/true)) return {};
  } catch (const std::exception& e) {
    throw RuntimeError("checkpoint " + path_ + ": unreadable " + name + ": " + first_line(e));
  }
  return tensor;
}

}  // namespace sparsevit::weights
