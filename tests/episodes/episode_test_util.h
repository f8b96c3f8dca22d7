// Small deterministic EpisodeSets and temporary folders for the episodes tests.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "episodes/episode_set.h"

namespace sparsevit::episodes::testing {

// A fresh folder under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sparsevit_episodes_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Episodes of the given lengths; every value encodes (step, column) so a copy from the wrong row
// or column shows: state = step * 10 + column, action = -(step * 10 + column),
// image byte = (step * 7 + offset) % 256.
inline EpisodeSet make_set(const std::vector<int64_t>& lengths, int64_t height = 2, int64_t width = 3,
                           int64_t state_dim = 5, int64_t action_dim = 2) {
  EpisodeSet set;
  set.task = "pusht";
  set.image_height = height;
  set.image_width = width;
  set.state_dim = state_dim;
  set.action_dim = action_dim;
  int64_t step = 0;
  for (int64_t length : lengths) {
    std::vector<uint8_t> images;
    std::vector<float> state, action;
    for (int64_t t = 0; t < length; ++t, ++step) {
      for (int64_t c = 0; c < state_dim; ++c) state.push_back(static_cast<float>(step * 10 + c));
      for (int64_t c = 0; c < action_dim; ++c) action.push_back(-static_cast<float>(step * 10 + c));
      for (int64_t i = 0; i < set.image_bytes(); ++i) images.push_back(static_cast<uint8_t>((step * 7 + i) % 256));
    }
    set.append_episode(images, state, action);
  }
  return set;
}

inline std::vector<uint8_t> read_all_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_all_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace sparsevit::episodes::testing
