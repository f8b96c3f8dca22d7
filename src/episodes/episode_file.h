// sparsevit's own demonstration file (`.episodes`): an EpisodeSet in one versioned, checksummed
// binary file that is read without parsing anything but a small JSON header. Byte layout in
// docs/episode_files.md.
#pragma once

#include <cstdint>
#include <string>

#include "episodes/episode_set.h"

namespace sparsevit::episodes {

inline constexpr char kEpisodeFileMagic[8] = {'S', 'V', 'E', 'P', 'I', 'S', 'O', 'D'};
inline constexpr uint32_t kEpisodeFileVersion = 1;

// Writes `set` (validated first: UsageError) through AtomicFile: readers see the old file or the
// whole new one. RuntimeError "cannot write PATH: why" on I/O failure.
void write_episode_file(const std::string& path, const EpisodeSet& set);

// Reads and checks everything (magic, version, header fields, section sizes against the file
// size before allocating, the crc32, episode ends): RuntimeError "PATH: what is wrong" for a
// missing, truncated, corrupt or foreign file.
EpisodeSet read_episode_file(const std::string& path);

}  // namespace sparsevit::episodes
