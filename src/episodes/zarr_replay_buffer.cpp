#include "episodes/zarr_replay_buffer.h"

#include <sys/stat.h>

#include <vector>

#include "episodes/zarr_array.h"
#include "util/errors.h"

namespace sparsevit::episodes {
namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw RuntimeError(where + ": " + what); }

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

// `array` must have `rank` dims and `steps` rows (steps < 0: not known yet).
void check_rows(const ZarrArray& array, size_t rank, int64_t steps, const char* expected) {
  if (array.shape().size() != rank)
    fail(array.dir(), "shape " + shape_text(array.shape()) + " is not " + expected);
  if (steps >= 0 && array.shape()[0] != steps)
    fail(array.dir(), "has " + std::to_string(array.shape()[0]) + " steps, data/state has " + std::to_string(steps));
}

}  // namespace

EpisodeSet read_zarr_replay_buffer(const std::string& dir) {
  std::string root = dir;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) fail(root, "no such zarr store");
  if (!S_ISDIR(st.st_mode))
    fail(root, "is a file; only zarr directory stores are read (unzip a .zarr.zip into a folder first)");
  if (!exists(root + "/.zgroup")) fail(root, "not a zarr v2 group (no .zgroup)");
  for (const char* array : {"data/state", "data/action", "meta/episode_ends"})
    if (!exists(root + "/" + array)) fail(root, std::string("has no ") + array + " (not a Diffusion Policy replay buffer)");

  EpisodeSet set;
  const std::string name = root.substr(root.find_last_of('/') + 1);
  set.task = name.size() > 5 && name.compare(name.size() - 5, 5, ".zarr") == 0 ? name.substr(0, name.size() - 5) : name;

  const ZarrArray state(root + "/data/state");
  check_rows(state, 2, -1, "[steps, state_dim]");
  const int64_t steps = state.shape()[0];
  set.state_dim = state.shape()[1];
  const ZarrArray action(root + "/data/action");
  check_rows(action, 2, steps, "[steps, action_dim]");
  set.action_dim = action.shape()[1];
  const ZarrArray ends(root + "/meta/episode_ends");
  if (ends.shape().size() != 1) fail(ends.dir(), "shape " + shape_text(ends.shape()) + " is not [episodes]");

  set.state = state.read_float32();
  set.action = action.read_float32();
  set.episode_ends = ends.read_int64();
  if (set.steps() != steps)
    fail(ends.dir(), "the last episode ends at step " + std::to_string(set.steps()) + " but data/state has " +
                         std::to_string(steps) + " steps");

  if (exists(root + "/data/img")) {
    const ZarrArray img(root + "/data/img");
    check_rows(img, 4, steps, "[steps, height, width, 3]");
    if (img.shape()[3] != EpisodeSet::kImageChannels)
      fail(img.dir(), "shape " + shape_text(img.shape()) + " is not [steps, height, width, 3] (RGB)");
    set.image_height = img.shape()[1];
    set.image_width = img.shape()[2];
    set.images = img.read_uint8();
  }
  try {
    set.validate();
  } catch (const UsageError& e) {
    fail(root, e.what());
  }
  return set;
}

}  // namespace sparsevit::episodes
