#include "episodes/demonstrations.h"

#include <filesystem>

#include "episodes/episode_file.h"
#include "episodes/zarr_replay_buffer.h"
#include "util/errors.h"

namespace sparsevit::episodes {

DemonstrationFormat demonstration_format(const std::string& path) {
  if (path.empty())
    throw UsageError("no demonstrations given: --data_path names a .episodes file (`sparsevit policy collect`) or "
                     "Diffusion Policy's zarr folder (pusht_cchi_v7_replay.zarr)");
  if (!std::filesystem::exists(path)) throw UsageError("demonstrations '" + path + "' do not exist");
  const std::string zipped = ".zarr.zip";
  const bool zipped_zarr =
      path.size() > zipped.size() && path.compare(path.size() - zipped.size(), zipped.size(), zipped) == 0;
  return std::filesystem::is_directory(path) || zipped_zarr ? DemonstrationFormat::kZarrReplayBuffer
                                                            : DemonstrationFormat::kEpisodeFile;
}

EpisodeSet read_demonstrations(const std::string& path) {
  switch (demonstration_format(path)) {
    case DemonstrationFormat::kZarrReplayBuffer:
      return read_zarr_replay_buffer(path);
    case DemonstrationFormat::kEpisodeFile:
      break;
  }
  return read_episode_file(path);
}

}  // namespace sparsevit::episodes
