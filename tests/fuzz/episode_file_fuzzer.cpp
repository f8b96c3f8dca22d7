// The .episodes reader: any file either gives a consistent EpisodeSet or a clear error.
#include <cstdint>

#include "episodes/episode_file.h"
#include "fuzz_support.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sparsevit::fuzz::TempFile file(data, size, ".episodes");
  try {
    const auto set = sparsevit::episodes::read_episode_file(file.path());
    set.validate();  // what the reader returns must be consistent; a throw here is a finding
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
