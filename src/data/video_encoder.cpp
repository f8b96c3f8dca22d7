#include "data/video_encoder.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "data/ffmpeg_support.h"
#include "util/atomic_file.h"
#include "util/errors.h"

extern "C" {
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
}

namespace sparsevit::data {

namespace {

using namespace ffmpeg;  // av_error, describe, kMaxSide, the deleters (data/ffmpeg_support.h)

struct OutputDeleter {
  void operator()(AVFormatContext* fmt) const { avformat_free_context(fmt); }
};

// FFmpeg's output goes to the AtomicFile's temporary; muxers seek back to patch headers and
// indexes, so every write is positioned (pwrite).
struct Sink {
  AtomicFile* file = nullptr;
  int64_t pos = 0;
  int64_t size = 0;
  std::string error;  // the AtomicFile's message, if a write failed
};

int write_packet(void* opaque, ffmpeg::WritePacketBuffer buf, int buf_size) {
  auto* sink = static_cast<Sink*>(opaque);
  if (!sink->error.empty()) return AVERROR(EIO);
  try {
    sink->file->write_at(static_cast<uint64_t>(sink->pos), buf, static_cast<size_t>(buf_size));
  } catch (const std::exception& e) {  // never through FFmpeg's C frames
    sink->error = e.what();
    return AVERROR(EIO);
  }
  sink->pos += buf_size;
  sink->size = std::max(sink->size, sink->pos);
  return buf_size;
}

int64_t sink_seek(void* opaque, int64_t offset, int whence) {
  auto* sink = static_cast<Sink*>(opaque);
  return ffmpeg::seek_position(sink->pos, sink->size, offset, whence);
}

// Encoders whose quality is a fixed quantiser (2: near-transparent) rather than a bitrate.
bool uses_qscale(AVCodecID id) {
  switch (id) {
    case AV_CODEC_ID_MPEG1VIDEO:
    case AV_CODEC_ID_MPEG2VIDEO:
    case AV_CODEC_ID_MPEG4:
    case AV_CODEC_ID_MJPEG:
    case AV_CODEC_ID_H263:
    case AV_CODEC_ID_H263P:
    case AV_CODEC_ID_MSMPEG4V2:
    case AV_CODEC_ID_MSMPEG4V3:
    case AV_CODEC_ID_WMV1:
    case AV_CODEC_ID_WMV2:
    case AV_CODEC_ID_FLV1: return true;
    default: return false;
  }
}

bool is_yuv(AVPixelFormat format) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  return desc != nullptr && !(desc->flags & AV_PIX_FMT_FLAG_RGB) && desc->nb_components >= 3;
}

bool is_gray(AVPixelFormat format) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  return desc != nullptr && !(desc->flags & AV_PIX_FMT_FLAG_RGB) && desc->nb_components <= 2;
}

bool is_full_range_yuv(AVPixelFormat format) {
  return format == AV_PIX_FMT_YUVJ420P || format == AV_PIX_FMT_YUVJ422P || format == AV_PIX_FMT_YUVJ444P ||
         format == AV_PIX_FMT_YUVJ440P || format == AV_PIX_FMT_YUVJ411P;
}

class Encoder {
 public:
  Encoder(const std::string& path, const VideoClip& clip, const std::string& codec_name)
      : path_(path), codec_name_(codec_name) {
    validate(clip);
    frames_ = clip.frames.contiguous();
    channels_ = frames_.size(0);
    count_ = frames_.size(1);
    height_ = frames_.size(2);
    width_ = frames_.size(3);
    rate_ = av_d2q(clip.fps, 65535);  // MPEG-4 part 2 needs a time base below 2^16
    if (rate_.num <= 0 || rate_.den <= 0) usage("fps " + std::to_string(clip.fps) + " has no usable rational form");
  }

  void run() {
    ffmpeg::init_logging();
    ffmpeg::take_error();
    const AVOutputFormat* format = av_guess_format(nullptr, path_.c_str(), nullptr);
    if (format == nullptr) usage("unknown video container for this file name's extension (.mp4, .avi, .mkv, .mov, ...)");
    if (format->flags & AVFMT_NOFILE)
      usage(std::string("the ") + format->name + " muxer writes image sequences, not one video file");
    const AVCodec* codec = find_codec(format);
    if (avformat_query_codec(format, codec->id, FF_COMPLIANCE_NORMAL) == 0)
      usage(std::string("the ") + format->name + " container cannot hold " + codec->name + " video");

    // Codec.
    const AVPixelFormat src_format = channels_ == 3 ? AV_PIX_FMT_GBRP : AV_PIX_FMT_GRAY8;  // the tensor's planes
    AVPixelFormat dst_format = channels_ == 3 ? AV_PIX_FMT_RGB24 : AV_PIX_FMT_GRAY8;
    if (codec->pix_fmts != nullptr) dst_format = avcodec_find_best_pix_fmt_of_list(codec->pix_fmts, src_format, 0, nullptr);
    // AVI stores uncompressed RGB as BI_RGB, which readers take as BGR.
    if (codec->id == AV_CODEC_ID_RAWVIDEO && channels_ == 3 && std::strcmp(format->name, "avi") == 0)
      dst_format = AV_PIX_FMT_BGR24;
    if (dst_format == AV_PIX_FMT_NONE) fail(std::string(codec->name) + " accepts no pixel format libswscale can write");
    std::unique_ptr<AVCodecContext, CodecDeleter> ctx(avcodec_alloc_context3(codec));
    if (!ctx) fail("out of memory");
    ctx->width = static_cast<int>(width_);
    ctx->height = static_cast<int>(height_);
    ctx->pix_fmt = dst_format;
    ctx->framerate = rate_;
    ctx->time_base = av_inv_q(rate_);
    ctx->gop_size = 12;
    ctx->thread_count = 1;
    if (uses_qscale(codec->id)) {
      ctx->flags |= AV_CODEC_FLAG_QSCALE;
      ctx->global_quality = 2 * FF_QP2LAMBDA;
    }
    if (std::strcmp(codec->name, "libx264") == 0 || std::strcmp(codec->name, "libx264rgb") == 0 ||
        std::strcmp(codec->name, "libx265") == 0)
      av_opt_set(ctx->priv_data, "crf", "18", 0);  // "visually lossless"; the default 23 blurs small clips
    if (is_yuv(dst_format)) {  // what libswscale's conversion below produces
      ctx->colorspace = AVCOL_SPC_SMPTE170M;
      ctx->color_range = is_full_range_yuv(dst_format) ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
    } else if (is_gray(dst_format)) {
      // libswscale's gray is full range; say so, or a decoder that returns gray H.264 as YUV
      // (FFmpeg's does) would expand 16..235 to 0..255 once more.
      ctx->color_range = AVCOL_RANGE_JPEG;
    }
    if (format->flags & AVFMT_GLOBALHEADER) ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int err = avcodec_open2(ctx.get(), codec, nullptr);
    if (err < 0)
      fail(std::string("cannot open the ") + codec->name + " encoder for " + std::to_string(width_) + "x" +
           std::to_string(height_) + " " + av_get_pix_fmt_name(dst_format) + " frames: " + describe(err));

    // Container, writing into the temporary of an AtomicFile.
    AtomicFile file(path_);
    Sink sink;
    sink.file = &file;
    auto io = ffmpeg::alloc_io(&sink, 1, nullptr, &write_packet, &sink_seek);
    if (!io) fail("out of memory");
    AVFormatContext* raw = nullptr;
    err = avformat_alloc_output_context2(&raw, format, nullptr, path_.c_str());
    std::unique_ptr<AVFormatContext, OutputDeleter> out(raw);  // declared after `io`: freed first
    if (err < 0 || !out) fail("cannot set up the " + std::string(format->name) + " muxer: " + describe(err));
    out->pb = io.get();
    out->flags |= AVFMT_FLAG_CUSTOM_IO;
    out->io_open = &ffmpeg::refuse_io_open;  // muxers write nothing but the one file
    AVStream* stream = avformat_new_stream(out.get(), nullptr);
    if (stream == nullptr) fail("out of memory");
    stream->time_base = ctx->time_base;
    stream->avg_frame_rate = rate_;
    stream->r_frame_rate = rate_;
    err = avcodec_parameters_from_context(stream->codecpar, ctx.get());
    if (err < 0) fail("cannot set up the stream: " + describe(err));
    err = avformat_write_header(out.get(), nullptr);
    if (err < 0) io_fail("cannot write the " + std::string(format->name) + " header", err, sink);

    // Frames: the tensor's planes -> the encoder's pixel format.
    std::unique_ptr<SwsContext, SwsDeleter> sws(sws_getContext(
        static_cast<int>(width_), static_cast<int>(height_), src_format, static_cast<int>(width_),
        static_cast<int>(height_), dst_format, SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP, nullptr, nullptr,
        nullptr));
    if (!sws) fail(std::string("cannot convert frames to ") + av_get_pix_fmt_name(dst_format));
    std::unique_ptr<AVFrame, FrameDeleter> frame(av_frame_alloc());
    std::unique_ptr<AVPacket, PacketDeleter> packet(av_packet_alloc());
    if (!frame || !packet) fail("out of memory");
    frame->format = dst_format;
    frame->width = ctx->width;
    frame->height = ctx->height;
    frame->colorspace = ctx->colorspace;
    frame->color_range = ctx->color_range;
    err = av_frame_get_buffer(frame.get(), 0);
    if (err < 0) fail("out of memory: " + av_error(err));

    const uint8_t* pixels = frames_.data_ptr<uint8_t>();
    const int64_t plane = width_ * height_;
    for (int64_t t = 0; t < count_; ++t) {
      err = av_frame_make_writable(frame.get());
      if (err < 0) fail("out of memory: " + av_error(err));
      const uint8_t* src[4] = {nullptr, nullptr, nullptr, nullptr};
      int src_linesize[4] = {0, 0, 0, 0};
      // [C, T, H, W]: channel c of frame t starts at (c * T + t) * H * W; GBRP wants G, B, R.
      static constexpr int kRgbChannelOfGbrpPlane[3] = {1, 2, 0};
      for (int p = 0; p < (channels_ == 3 ? 3 : 1); ++p) {
        const int c = channels_ == 3 ? kRgbChannelOfGbrpPlane[p] : 0;
        src[p] = pixels + (c * count_ + t) * plane;
        src_linesize[p] = static_cast<int>(width_);
      }
      sws_scale(sws.get(), src, src_linesize, 0, static_cast<int>(height_), frame->data, frame->linesize);
      frame->pts = t;
      encode(ctx.get(), frame.get(), packet.get(), out.get(), stream, sink);
    }
    encode(ctx.get(), nullptr, packet.get(), out.get(), stream, sink);  // flush the encoder
    err = av_write_trailer(out.get());
    if (err < 0) io_fail("cannot finish the file", err, sink);
    avio_flush(io.get());
    if (io->error < 0) io_fail("cannot write the file", io->error, sink);
    file.commit();
  }

 private:
  [[noreturn]] void usage(const std::string& what) const { throw UsageError("cannot write video " + path_ + ": " + what); }
  [[noreturn]] void fail(const std::string& what) const { throw RuntimeError("cannot write video " + path_ + ": " + what); }
  [[noreturn]] void io_fail(const std::string& what, int err, const Sink& sink) const {
    if (!sink.error.empty()) throw RuntimeError(sink.error);  // the AtomicFile's own message names the file
    fail(what + ": " + describe(err));
  }

  void validate(const VideoClip& clip) const {
    const at::Tensor& f = clip.frames;
    if (!f.defined()) usage("the clip has no frames tensor");
    if (f.dim() != 4 || f.scalar_type() != at::kByte)
      usage("frames must be uint8 [C, T, H, W], got " + std::string(f.dtype().name()) + " with " +
            std::to_string(f.dim()) + " dimensions");
    if (!f.device().is_cpu()) usage("frames must be on the CPU");
    if (f.size(0) != 1 && f.size(0) != 3) usage("frames need 1 (gray) or 3 (RGB) channels, got " + std::to_string(f.size(0)));
    if (f.size(1) < 1 || f.size(2) < 1 || f.size(3) < 1) usage("the clip is empty");
    if (f.size(2) > kMaxSide || f.size(3) > kMaxSide)
      usage("frames of " + std::to_string(f.size(3)) + "x" + std::to_string(f.size(2)) + " exceed " +
            std::to_string(kMaxSide) + "x" + std::to_string(kMaxSide));
    if (!std::isfinite(clip.fps) || clip.fps <= 0 || clip.fps > 1000)
      usage("fps must be in (0, 1000], got " + std::to_string(clip.fps));
  }

  const AVCodec* find_codec(const AVOutputFormat* format) const {
    if (codec_name_.empty()) {
      if (format->video_codec == AV_CODEC_ID_NONE) usage(std::string("the ") + format->name + " container holds no video");
      const AVCodec* codec = avcodec_find_encoder(format->video_codec);
      if (codec == nullptr)
        usage(std::string("this FFmpeg build has no encoder for ") + avcodec_get_name(format->video_codec) +
              ", the default codec of " + format->name + "; name one");
      return codec;
    }
    const AVCodec* codec = avcodec_find_encoder_by_name(codec_name_.c_str());
    if (codec == nullptr || codec->type != AVMEDIA_TYPE_VIDEO)
      usage("this FFmpeg build has no video encoder named '" + codec_name_ + "'");
    return codec;
  }

  // Sends one frame (nullptr: end of stream) and writes every packet the encoder returns.
  void encode(AVCodecContext* ctx, const AVFrame* frame, AVPacket* packet, AVFormatContext* out, AVStream* stream,
              const Sink& sink) {
    int err = avcodec_send_frame(ctx, frame);
    if (err < 0) fail(std::string(ctx->codec->name) + " refused a frame: " + describe(err));
    while (true) {
      err = avcodec_receive_packet(ctx, packet);
      if (err == AVERROR(EAGAIN) || err == AVERROR_EOF) return;
      if (err < 0) fail(std::string(ctx->codec->name) + " failed: " + describe(err));
      av_packet_rescale_ts(packet, ctx->time_base, stream->time_base);
      packet->stream_index = stream->index;
      err = av_interleaved_write_frame(out, packet);  // takes the packet's reference
      if (err < 0) io_fail("cannot write a packet", err, sink);
    }
  }

  std::string path_, codec_name_;
  at::Tensor frames_;
  int64_t channels_ = 0, count_ = 0, height_ = 0, width_ = 0;
  AVRational rate_{0, 1};
};

}  // namespace

void write_video_file(const std::string& path, const VideoClip& clip, const std::string& codec) {
  Encoder(path, clip, codec).run();
}

bool has_video_encoder(const std::string& codec) {
  if (codec.empty()) return false;
  const AVCodec* c = avcodec_find_encoder_by_name(codec.c_str());
  return c != nullptr && c->type == AVMEDIA_TYPE_VIDEO;
}

}  // namespace sparsevit::data
