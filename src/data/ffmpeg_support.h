// Internal to sparsevit_data: what the video decoder (video_decoder.cpp) and encoder
// (video_encoder.cpp) share of FFmpeg's API: its log kept per thread instead of printed, error
// texts, the frame-size limit, RAII owners, custom AVIO contexts and their seeking. Unlike the
// public headers video_decoder.h / video_encoder.h this one includes FFmpeg's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

namespace sparsevit::data::ffmpeg {

// Frames at most this wide and high, decoded or encoded.
inline constexpr int64_t kMaxSide = 8192;

// Routes FFmpeg's log to a per-thread buffer instead of stderr (once per process; nothing is
// printed), and returns-and-clears the last error-level message of this thread ("" if none).
void init_logging();
std::string take_error();

// FFmpeg's text for an error code ("Invalid data found when processing input").
std::string av_error(int err);
// The same plus this thread's last logged error, if any (taken): "Invalid data found when
// processing input (moov atom not found)".
std::string describe(int err);

struct IoDeleter {
  void operator()(AVIOContext* io) const {
    av_freep(&io->buffer);  // avio may have replaced the buffer it was given
    avio_context_free(&io);
  }
};
struct CodecDeleter {
  void operator()(AVCodecContext* ctx) const { avcodec_free_context(&ctx); }
};
struct FrameDeleter {
  void operator()(AVFrame* frame) const { av_frame_free(&frame); }
};
struct PacketDeleter {
  void operator()(AVPacket* packet) const { av_packet_free(&packet); }
};
struct SwsDeleter {
  void operator()(SwsContext* sws) const { sws_freeContext(sws); }
};

// avio_alloc_context's write callback: FFmpeg 7 (libavformat 61) made its buffer const.
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using WritePacketBuffer = const uint8_t*;
#else
using WritePacketBuffer = uint8_t*;
#endif

// An AVIO context with its own 64 KiB buffer over `opaque` (avio_alloc_context's callbacks;
// write_flag 1 for output); nullptr when out of memory.
std::unique_ptr<AVIOContext, IoDeleter> alloc_io(void* opaque, int write_flag,
                                                 int (*read_packet)(void*, uint8_t*, int),
                                                 int (*write_packet)(void*, WritePacketBuffer, int),
                                                 int64_t (*seek)(void*, int64_t, int));

// An AVIO seek callback's work over a stream of `size` bytes read or written at `pos`: the
// size for AVSEEK_SIZE, else moves `pos` and returns it (AVERROR(EINVAL) for a bad whence or a
// negative target).
int64_t seek_position(int64_t& pos, int64_t size, int64_t offset, int whence);

// An io_open callback that refuses: demuxers and muxers touch nothing but the one file (no
// playlists, references, URLs).
int refuse_io_open(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**);

}  // namespace sparsevit::data::ffmpeg
