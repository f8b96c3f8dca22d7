// The one place that decides which reader a demonstrations path needs: a folder, or a zipped
// store (`*.zarr.zip`, which the zarr reader refuses with its remedy), is Diffusion Policy's zarr
// replay buffer (zarr_replay_buffer.h); any other file is our `.episodes` (episode_file.h). Used by
// `policy train / probe / pose-fit / dataset-info` and MAE pretraining on demonstration frames.
#pragma once

#include <string>

#include "episodes/episode_set.h"

namespace sparsevit::episodes {

enum class DemonstrationFormat { kEpisodeFile, kZarrReplayBuffer };

// The format of `path` by the rule above (UsageError when the path does not exist).
DemonstrationFormat demonstration_format(const std::string& path);

// The demonstrations at `path`, read by the reader of demonstration_format(path).
EpisodeSet read_demonstrations(const std::string& path);

}  // namespace sparsevit::episodes
