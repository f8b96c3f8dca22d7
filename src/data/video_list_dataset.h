// Videos listed in TimeSformer's annotation format: `--data_path DIR` holds train.csv and
// test.csv (or val.csv), one clip per line as `PATH LABEL` (TimeSformer's default separator, a
// space; a comma is accepted too; the label is the last field, so paths may contain spaces).
// PATH, relative to DIR unless absolute, is a video file (decoded by FFmpeg) or a folder of
// JPEG / PNG frames in name order (the layout SSv2 / Kinetics users extract), taken at the
// nominal 30 fps. Empty lines and lines starting with '#' are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/video_dataset.h"
#include "data/video_window.h"

namespace sparsevit::data {

struct VideoListEntry {
  std::string path;  // as resolved against the list's folder
  int64_t label = 0;
};

// Parses a list's text; `source` names it in errors ("DIR/train.csv:12: label 'x' is not a
// class index"); relative paths are resolved against `base_dir`. UsageError on bad lines.
std::vector<VideoListEntry> parse_video_list(const std::string& text, const std::string& source,
                                             const std::string& base_dir);

// The list a split reads under `dir`: train.csv for training; test.csv, else val.csv, for
// evaluation. UsageError naming the folder when it has none.
std::string video_list_path(const std::string& dir, bool train);

// Reads windows too (VideoWindowSource): a video file decodes only the picked frames' window
// (decode_video_frames), a frame folder reads only the picked frames' files.
class VideoListDataset : public VideoDataset, public VideoWindowSource {
 public:
  // Reads the split's list; every listed path must exist (UsageError naming the first missing
  // ones). The class count is the largest label of every list in `dir`, plus one.
  VideoListDataset(const std::string& dir, bool train, int64_t channels = 3);
  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  VideoClip clip(int64_t index) const override;
  PickedFrames picked_frames(int64_t index, const FramePicker& pick) const override;
  int64_t label(int64_t index) const override;
  int64_t num_classes() const override { return num_classes_; }
  int64_t channels() const override { return channels_; }
  std::string describe() const override;
  const std::vector<VideoListEntry>& entries() const { return entries_; }

 private:
  std::string list_path_;
  std::vector<VideoListEntry> entries_;
  int64_t num_classes_ = 0;
  int64_t channels_ = 3;
};

// The frames of a frame folder, in natural name order (frame_2 before frame_10), as one clip
// at `fps`. RuntimeError naming the folder when it has no image or the frames differ in size.
VideoClip read_frame_folder(const std::string& dir, int64_t channels, double fps = 30.0);

// Only the frames `pick` chooses (T = the folder's frame count): the same as
// read_frame_folder(...).frames.index_select(1, indices), reading the picked files and the
// folder's first frame (the size every frame must have; frames outside the window are not
// checked).
PickedFrames read_frame_folder_frames(const std::string& dir, int64_t channels, const FramePicker& pick,
                                      double fps = 30.0);

}  // namespace sparsevit::data
