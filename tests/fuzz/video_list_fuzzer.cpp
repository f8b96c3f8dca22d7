// TimeSformer annotation lists (data::parse_video_list, what `--dataset video_list` reads from
// train.csv / test.csv / val.csv): the bytes are the list's text. Every entry that comes back must
// have a path and a label in [0, 999999999] (the parser's own bounds), else the harness aborts.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/video_list_dataset.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& e : sparsevit::data::parse_video_list(text, "fuzz.csv", "/nonexistent")) {
      if (e.path.empty() || e.label < 0 || e.label > 999999999) std::abort();
      if (e.path.find('\0') != std::string::npos) std::abort();
    }
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  return 0;
}
