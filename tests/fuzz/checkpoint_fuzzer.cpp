// Checkpoint files: the bytes are the file, so the header, size and checksum checks are fuzzed.
// With SPARSEVIT_FUZZ_CHECKPOINT_ARCHIVE=1 the first byte picks the mode and mode 1 wraps the
// payload in a valid header and checksum, so the input reaches LibTorch's archive reader behind
// them. That mode finds crashes inside LibTorch 1.13's TorchScript deserializer (docs/fuzzing.md),
// which no check of ours can prevent; it is off by default so that runs test what we own.
// Either way the result is a loaded checkpoint or sparsevit::RuntimeError.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz_support.h"
#include "util/errors.h"
#include "weights/checkpoint_file.h"


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string bytes;
  static const bool archive_mode = std::getenv("SPARSEVIT_FUZZ_CHECKPOINT_ARCHIVE") != nullptr;
  if (archive_mode && (data[0] & 1)) {
    bytes.assign(32, '\0');
    std::memcpy(bytes.data(), "SVCKPT01", 8);
    const uint64_t payload = size - 1, sum = sparsevit::weights::checkpoint_payload_checksum(data + 1, size - 1);
    for (int i = 0; i < 8; ++i) {
      bytes[8 + i] = static_cast<char>((payload >> (8 * i)) & 0xff);
      bytes[16 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
    }
    bytes.append(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    bytes.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  }
  sparsevit::fuzz::TempFile file(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), ".pt");
  try {
    const sparsevit::weights::CheckpointFile checkpoint(file.path());
    (void)checkpoint.metadata_json();
    // What resuming asks of a file: its training-state sections and torch's generator.
    (void)checkpoint.has_section("optimizer");
    (void)checkpoint.has_section("ema");
    (void)checkpoint.buffer("torch_rng_state");
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
