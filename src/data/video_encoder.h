// Video files written with FFmpeg's libraries (libavformat, libavcodec, libswscale): for tests,
// fixtures, previews and converted datasets. No FFmpeg type leaks out of this header.
#pragma once

#include <string>

#include "data/video_clip.h"

namespace sparsevit::data {

// Writes `clip` (uint8 [C, T, H, W] on the CPU, C 1 or 3, T >= 1, frames at most 8192 x 8192) at
// clip.fps. The container comes from the path's extension (.mp4, .avi, .mkv, .mov, .webm, ...);
// `codec` is an FFmpeg encoder name ("mpeg4", "libx264", "mjpeg", "ffv1", "png", "rawvideo",
// "mpeg2video", ...), "" for the container's default. Frames are converted with libswscale to
// the encoder's pixel format that loses least (RGB clips stay RGB for ffv1 / png / rawvideo, so
// they round-trip bit-exactly; lossy codecs get YUV). Lossy encoders run at high quality
// (quantiser 2 for mpeg4 / mpeg2video / mjpeg, libx264's default CRF) on one thread.
// The file is written atomically (util/atomic_file.h): a temporary in the same folder, renamed
// over `path` once complete; on any failure `path` is untouched.
// Errors: UsageError naming the file for a bad clip, an unknown container or encoder, or a
// container that cannot hold the codec; RuntimeError naming the file when encoding or writing
// fails (e.g. libx264 refuses odd frame sizes in 4:2:0).
void write_video_file(const std::string& path, const VideoClip& clip, const std::string& codec = "");

// Whether this FFmpeg build has a video encoder of that name (Debian 12's lacks e.g.
// "libopenh264"; tests skip the codecs it does not have).
bool has_video_encoder(const std::string& codec);

}  // namespace sparsevit::data
