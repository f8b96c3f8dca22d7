// Diffusion Policy's ReplayBuffer as saved to a zarr v2 directory store (e.g.
// pusht_cchi_v7_replay.zarr/): `data/<key>` arrays whose first dim is the step, and
// `meta/episode_ends` (int64, exclusive ends). Layout and what is refused: docs/episode_files.md.
#pragma once

#include <string>

#include "episodes/episode_set.h"

namespace sparsevit::episodes {

// Reads data/state [T, S], data/action [T, A], meta/episode_ends [E] and, when present,
// data/img [T, H, W, 3] (float 0–255 as Diffusion Policy stores it, or uint8; converted to
// uint8, values outside [0, 255] refused). Other keys (keypoint, n_contacts) are not read.
// `task` is the store's folder name without ".zarr". RuntimeError naming the store and the
// array for anything missing, inconsistent, unsupported or corrupt (a .zarr.zip file too).
EpisodeSet read_zarr_replay_buffer(const std::string& dir);

}  // namespace sparsevit::episodes
