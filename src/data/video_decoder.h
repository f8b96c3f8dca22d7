// Video files decoded with FFmpeg's libraries (libavformat, libavcodec, libswscale): every frame
// of the first video stream as uint8 [C, T, H, W]. No FFmpeg type leaks out of this header.
//
// Errors are one-line RuntimeErrors naming the file (UsageError for a bad `channels`):
//   "<path>: no such file" / "<path>: cannot open: ..."   the file cannot be opened
//   "<path>: empty file, not a video"
//   "<path>: not a readable video file (WHY)"           no container FFmpeg recognises, or its
//                                                       header is damaged or cut off (an .mp4 cut
//                                                       before its index: "moov atom not found")
//   "<path>: no video stream"                           e.g. an audio-only file
//   "<path>: unsupported video codec NAME"              no decoder in this FFmpeg build
//   "<path>: truncated or corrupt video: WHY after N frames"
//                                                       a demux or decode error, or a packet the
//                                                       file ends inside of, before the end of the
//                                                       stream: an error even when N > 0 (a clip
//                                                       with missing frames is not returned)
//   "<path>: no decodable video frames"                 a stream that ends without one frame
//   "<path>: ... exceeds the limit ..."                 the limits below
// WHY is FFmpeg's error text plus its last logged error, if any. A file cut between packets
// ends cleanly and decodes to fewer frames: Matroska (which drops a block the file ends inside)
// cut anywhere after its header, AVI cut exactly at a chunk boundary. Nothing is printed.
//
// Limits (so that hostile or fuzzed inputs cannot exhaust memory): frames at most 8192 x 8192,
// at most 100000 frames, at most 4 GiB of decoded pixels per clip (of the frames kept, for
// decode_video_frames).
//
// Decoding is single-threaded (the data loader runs several decoders at once) and thread-safe.
// Only the file itself is read: FFmpeg's demuxers are not allowed to open other files or URLs
// (playlists, references in .mov / .m3u8 / concat files are refused).
#pragma once

#include <cstdint>
#include <string>

#include "data/video_clip.h"
#include "data/video_window.h"

namespace sparsevit::data {

// Decodes every frame of the first video stream (attached cover pictures are not video) to
// uint8 [channels, T, H, W]: channels 3 = RGB, 1 = gray (luma), converted by libswscale. Frames
// that change size mid-stream are scaled to the first frame's size. fps: the stream's average
// frame rate, else its real base frame rate, else 30.
VideoClip decode_video_file(const std::string& path, int64_t channels);

// The same from bytes in memory (what the fuzzer calls); `name` stands for the file in errors.
VideoClip decode_video_bytes(const std::string& bytes, int64_t channels, const std::string& name);

// Only the frames `pick` chooses (data/video_window.h): the same pixels, in the picker's order,
// as `decode_video_file(...).frames.index_select(1, indices)`, decoding only their window.
// The picker is told the frame count the container declares, and the window is decoded from the
// keyframe at or before its first frame (a backward seek) up to its last frame; a frame is
// identified by its presentation timestamp (round((pts - start_time) * time_base * rate), so
// B-frames, timestamps that do not start at 0 and seeks that land early are handled).
// Falls back to decoding every frame (then picking on the decoded count, PickedFrames::windowed
// false) when the window cannot be trusted: the container declares no frame count (Matroska /
// WebM, streams without an index), the count disagrees with the duration and rate, the index
// points past the end of the file (a cut file), more than 100000 frames are declared, the
// seek fails or lands after the window even from the start, the decoded timestamps skip or
// repeat a frame (variable frame rate), a frame has another size than the stream's, the stream
// ends before the declared count or runs past it, or any error while decoding the window. The
// picker may therefore be called twice. Errors and limits are decode_video_file's (a fallback
// reports them as the whole decode does; the decoded-bytes limit counts the frames kept), plus
// a RuntimeError when the picker returns no index or one outside [0, T).
PickedFrames decode_video_frames(const std::string& path, int64_t channels, const FramePicker& pick);

// The same from bytes in memory (the fuzzer).
PickedFrames decode_video_bytes_frames(const std::string& bytes, int64_t channels, const std::string& name,
                                       const FramePicker& pick);

// Container-level facts, without decoding every frame (FFmpeg decodes a few to find them).
struct VideoInfo {
  int64_t width = 0, height = 0;
  int64_t declared_frames = 0;  // what the container declares; 0 if it does not say
  double fps = 0;               // as decode_video_file reports it
  std::string codec;            // FFmpeg's codec name: "ffv1", "h264", "mpeg4", "mjpeg", ...
};
VideoInfo probe_video_file(const std::string& path);

namespace detail {
// The decoded-bytes limit per clip (default 4 GiB); the fuzzer lowers it to stay within its
// memory limit. Process-wide.
void set_max_decoded_bytes(int64_t bytes);
}  // namespace detail

}  // namespace sparsevit::data
