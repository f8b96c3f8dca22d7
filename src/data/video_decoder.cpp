#include "data/video_decoder.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "data/ffmpeg_support.h"
#include "util/errors.h"

extern "C" {
#include <libavutil/pixdesc.h>
}

namespace sparsevit::data {

namespace {

using namespace ffmpeg;  // av_error, describe, kMaxSide, the deleters (data/ffmpeg_support.h)

constexpr int64_t kMaxFrames = 100000;
std::atomic<int64_t> g_max_decoded_bytes{int64_t{1} << 32};

// ---- RAII --------------------------------------------------------------------------------------

struct InputDeleter {
  void operator()(AVFormatContext* fmt) const { avformat_close_input(&fmt); }
};
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The bytes FFmpeg reads: a file (pread) or a buffer in memory.
struct Source {
  int fd = -1;
  const uint8_t* data = nullptr;
  int64_t size = 0;
  int64_t pos = 0;
};

int read_packet(void* opaque, uint8_t* buf, int buf_size) {
  auto* src = static_cast<Source*>(opaque);
  const int64_t left = src->size - src->pos;
  if (left <= 0 || buf_size <= 0) return AVERROR_EOF;
  const int n = static_cast<int>(std::min<int64_t>(left, buf_size));
  if (src->data != nullptr) {
    std::memcpy(buf, src->data + src->pos, static_cast<size_t>(n));
    src->pos += n;
    return n;
  }
  ssize_t got;
  do {
    got = ::pread(src->fd, buf, static_cast<size_t>(n), static_cast<off_t>(src->pos));
  } while (got < 0 && errno == EINTR);
  if (got < 0) return AVERROR(errno);
  if (got == 0) return AVERROR_EOF;
  src->pos += got;
  return static_cast<int>(got);
}

int64_t seek(void* opaque, int64_t offset, int whence) {
  auto* src = static_cast<Source*>(opaque);
  return ffmpeg::seek_position(src->pos, src->size, offset, whence);
}

// The opened container: the AVIO context outlives the format context (declaration order).
struct Input {
  std::unique_ptr<AVIOContext, IoDeleter> io;
  std::unique_ptr<AVFormatContext, InputDeleter> fmt;
};

[[noreturn]] void fail(const std::string& name, const std::string& what) { throw RuntimeError(name + ": " + what); }

void open_input(Input& in, Source& src, const std::string& name) {
  ffmpeg::init_logging();
  ffmpeg::take_error();
  in.io = ffmpeg::alloc_io(&src, 0, &read_packet, nullptr, &seek);
  if (!in.io) fail(name, "out of memory");
  in.fmt.reset(avformat_alloc_context());
  if (!in.fmt) fail(name, "out of memory");
  in.fmt->pb = in.io.get();
  in.fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  in.fmt->io_open = &ffmpeg::refuse_io_open;  // the file itself only
  AVFormatContext* raw = in.fmt.release();
  // The name only guides probing by extension; every byte comes from `src`.
  const int err = avformat_open_input(&raw, name.c_str(), nullptr, nullptr);  // frees raw on failure
  in.fmt.reset(raw);
  if (err < 0) {
    if (src.size == 0) fail(name, "empty file, not a video");
    fail(name, "not a readable video file (" + describe(err) + ")");
  }
  const int info = avformat_find_stream_info(in.fmt.get(), nullptr);
  if (info < 0) fail(name, "cannot read the stream information: " + describe(info));
}

// The first video stream that is not an attached picture (cover art), or -1.
int first_video_stream(const AVFormatContext* fmt) {
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    const AVStream* st = fmt->streams[i];
    if (st->codecpar->codec_type == AVMEDIA_TYPE_VIDEO && !(st->disposition & AV_DISPOSITION_ATTACHED_PIC))
      return static_cast<int>(i);
  }
  return -1;
}

[[noreturn]] void no_video_stream(const std::string& name, const AVFormatContext* fmt) {
  fail(name, std::string("no video stream (") + fmt->iformat->name + " container, " + std::to_string(fmt->nb_streams) +
                 (fmt->nb_streams == 1 ? " stream)" : " streams)"));
}

double stream_fps(const AVStream* st) {
  for (AVRational r : {st->avg_frame_rate, st->r_frame_rate}) {
    if (r.num > 0 && r.den > 0) {
      const double fps = av_q2d(r);
      if (std::isfinite(fps) && fps > 0) return fps;
    }
  }
  return 30.0;
}

void check_size(const std::string& name, int64_t width, int64_t height) {
  if (width > kMaxSide || height > kMaxSide)
    fail(name, "frame size " + std::to_string(width) + "x" + std::to_string(height) + " exceeds the limit of " +
                   std::to_string(kMaxSide) + "x" + std::to_string(kMaxSide));
}

Source file_source(Fd& fd, const std::string& path) {
  fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd.fd < 0) {
    const int err = errno;
    if (err == ENOENT) fail(path, "no such file");
    fail(path, std::string("cannot open: ") + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a video file");
  Source src;
  src.fd = fd.fd;
  src.size = S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : 0;
  return src;
}

// Decodes and converts every frame of the first video stream.
class Decoder {
 public:
  Decoder(std::string name, int64_t channels) : name_(std::move(name)), channels_(channels) {}

  VideoClip run(Source& src) {
    Input in;
    open_input(in, src, name_);
    AVFormatContext* fmt = in.fmt.get();
    const int index = first_video_stream(fmt);
    if (index < 0) no_video_stream(name_, fmt);
    for (unsigned i = 0; i < fmt->nb_streams; ++i)
      if (static_cast<int>(i) != index) fmt->streams[i]->discard = AVDISCARD_ALL;
    const AVStream* st = fmt->streams[index];
    const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
    if (codec == nullptr) fail(name_, std::string("unsupported video codec ") + avcodec_get_name(st->codecpar->codec_id));
    check_size(name_, st->codecpar->width, st->codecpar->height);

    std::unique_ptr<AVCodecContext, CodecDeleter> ctx(avcodec_alloc_context3(codec));
    if (!ctx) fail(name_, "out of memory");
    int err = avcodec_parameters_to_context(ctx.get(), st->codecpar);
    if (err < 0) fail(name_, "cannot set up the " + std::string(codec->name) + " decoder: " + describe(err));
    ctx->thread_count = 1;  // the data loader runs decoders in parallel already
    ctx->pkt_timebase = st->time_base;
    err = avcodec_open2(ctx.get(), codec, nullptr);
    if (err < 0) fail(name_, "cannot open the " + std::string(codec->name) + " decoder: " + describe(err));

    std::unique_ptr<AVPacket, PacketDeleter> packet(av_packet_alloc());
    frame_.reset(av_frame_alloc());
    converted_.reset(av_frame_alloc());
    if (!packet || !frame_ || !converted_) fail(name_, "out of memory");

    while (true) {
      err = av_read_frame(fmt, packet.get());
      if (err == AVERROR_EOF) break;
      if (err < 0) corrupt(err);
      if (packet->stream_index == index) {
        // A packet the demuxer could only read in part (the file ends inside it).
        if (packet->flags & AV_PKT_FLAG_CORRUPT) corrupt(AVERROR_INVALIDDATA, "a packet is cut short");
        err = avcodec_send_packet(ctx.get(), packet.get());
        av_packet_unref(packet.get());
        if (err < 0) corrupt(err);
        receive(ctx.get());
      } else {
        av_packet_unref(packet.get());
      }
    }
    err = avcodec_send_packet(ctx.get(), nullptr);  // flush: the frames the decoder still holds
    if (err < 0 && err != AVERROR_EOF) corrupt(err);
    receive(ctx.get());

    if (frames_.empty()) fail(name_, "no decodable video frames");
    VideoClip clip;
    clip.fps = stream_fps(st);
    clip.frames = assemble();
    return clip;
  }

 private:
  [[noreturn]] void corrupt(int err, const std::string& why = "") {
    fail(name_, "truncated or corrupt video: " + (why.empty() ? describe(err) : why) + " after " +
                    std::to_string(frames_.size()) + " frames");
  }

  void receive(AVCodecContext* ctx) {
    while (true) {
      const int err = avcodec_receive_frame(ctx, frame_.get());
      if (err == AVERROR(EAGAIN) || err == AVERROR_EOF) return;
      if (err < 0) corrupt(err);
      convert(*frame_);
      av_frame_unref(frame_.get());
    }
  }

  // One decoded frame -> planar [C, H, W] bytes (GBRP or GRAY8 through libswscale).
  void convert(const AVFrame& frame) {
    if (frame.width <= 0 || frame.height <= 0 || frame.format < 0)
      fail(name_, "truncated or corrupt video: a frame without size or pixel format after " +
                      std::to_string(frames_.size()) + " frames");
    check_size(name_, frame.width, frame.height);
    if (frames_.empty()) {
      width_ = frame.width;
      height_ = frame.height;
      const auto dst = channels_ == 3 ? AV_PIX_FMT_GBRP : AV_PIX_FMT_GRAY8;
      converted_->format = dst;
      converted_->width = static_cast<int>(width_);
      converted_->height = static_cast<int>(height_);
      const int err = av_frame_get_buffer(converted_.get(), 0);
      if (err < 0) fail(name_, "out of memory: " + av_error(err));
    }
    const int64_t frame_bytes = channels_ * width_ * height_;
    if (static_cast<int64_t>(frames_.size()) >= kMaxFrames)
      fail(name_, "more than " + std::to_string(kMaxFrames) + " frames exceeds the limit");
    const int64_t limit = g_max_decoded_bytes.load();
    if (frame_bytes * static_cast<int64_t>(frames_.size() + 1) > limit)
      fail(name_, "the decoded clip exceeds the limit of " + std::to_string(limit) + " bytes after " +
                      std::to_string(frames_.size()) + " frames");

    const auto src_format = static_cast<AVPixelFormat>(frame.format);
    if (!sws_isSupportedInput(src_format))
      fail(name_, std::string("unsupported pixel format ") + (av_get_pix_fmt_name(src_format) ? av_get_pix_fmt_name(src_format) : "?"));
    SwsContext* sws = sws_getCachedContext(sws_.release(), frame.width, frame.height, src_format,
                                           static_cast<int>(width_), static_cast<int>(height_),
                                           static_cast<AVPixelFormat>(converted_->format),
                                           SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr, nullptr, nullptr);
    sws_.reset(sws);
    if (!sws_) fail(name_, "cannot convert frames of pixel format " + std::string(av_get_pix_fmt_name(src_format)));
    // Set the colorspace again whenever the source changes (the cached context may be new).
    const std::array<int, 5> key{frame.width, frame.height, frame.format, frame.colorspace, frame.color_range};
    if (key != sws_key_) {
      set_colorspace(frame, src_format);
      sws_key_ = key;
    }
    const int rows = sws_scale(sws_.get(), frame.data, frame.linesize, 0, frame.height, converted_->data, converted_->linesize);
    if (rows <= 0) fail(name_, "cannot convert a frame of pixel format " + std::string(av_get_pix_fmt_name(src_format)));

    // Rows one by one: the converted planes are padded (linesize >= width).
    std::unique_ptr<uint8_t[]> planes(new uint8_t[static_cast<size_t>(frame_bytes)]);
    static constexpr int kGbrpPlaneOfRgb[3] = {2, 0, 1};  // R, G, B live in GBRP's planes 2, 0, 1
    for (int64_t c = 0; c < channels_; ++c) {
      const int plane = channels_ == 3 ? kGbrpPlaneOfRgb[c] : 0;
      const uint8_t* in = converted_->data[plane];
      uint8_t* out = planes.get() + c * width_ * height_;
      for (int64_t y = 0; y < height_; ++y)
        std::memcpy(out + y * width_, in + y * converted_->linesize[plane], static_cast<size_t>(width_));
    }
    frames_.push_back(std::move(planes));
  }

  // YUV sources: the frame's own matrix (BT.709 for HD video, BT.601 by default) and range.
  void set_colorspace(const AVFrame& frame, AVPixelFormat src_format) {
    const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(src_format);
    if (desc == nullptr || (desc->flags & AV_PIX_FMT_FLAG_RGB) || desc->nb_components < 3) return;
    int *inv_table = nullptr, *table = nullptr;
    int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
    if (sws_getColorspaceDetails(sws_.get(), &inv_table, &src_range, &table, &dst_range, &brightness, &contrast,
                                 &saturation) < 0)
      return;
    int space = SWS_CS_DEFAULT;
    switch (frame.colorspace) {
      case AVCOL_SPC_BT709: space = SWS_CS_ITU709; break;
      case AVCOL_SPC_FCC: space = SWS_CS_FCC; break;
      case AVCOL_SPC_SMPTE240M: space = SWS_CS_SMPTE240M; break;
      case AVCOL_SPC_BT2020_NCL:
      case AVCOL_SPC_BT2020_CL: space = SWS_CS_BT2020; break;
      default: break;
    }
    src_range = src_range || frame.color_range == AVCOL_RANGE_JPEG;
    sws_setColorspaceDetails(sws_.get(), sws_getCoefficients(space), src_range, table, dst_range, brightness,
                             contrast, saturation);
  }

  // [C, T, H, W]; each frame's buffer is freed as soon as it is copied, so the peak stays near
  // one clip (the tensor's pages are only touched as they are filled).
  at::Tensor assemble() {
    const auto t_count = static_cast<int64_t>(frames_.size());
    at::Tensor out = at::empty({channels_, t_count, height_, width_}, at::TensorOptions().dtype(at::kByte));
    uint8_t* dst = out.data_ptr<uint8_t>();
    const int64_t plane = width_ * height_;
    for (int64_t t = 0; t < t_count; ++t) {
      for (int64_t c = 0; c < channels_; ++c)
        std::memcpy(dst + (c * t_count + t) * plane, frames_[t].get() + c * plane, static_cast<size_t>(plane));
      frames_[t].reset();
    }
    return out;
  }

  std::string name_;
  int64_t channels_;
  int64_t width_ = 0, height_ = 0;
  std::unique_ptr<AVFrame, FrameDeleter> frame_, converted_;
  std::unique_ptr<SwsContext, SwsDeleter> sws_;
  std::array<int, 5> sws_key_{-1, -1, -1, -1, -1};
  std::vector<std::unique_ptr<uint8_t[]>> frames_;
};

void check_channels(int64_t channels, const std::string& name) {
  if (channels != 1 && channels != 3)
    throw UsageError(name + ": video channels must be 1 (gray) or 3 (RGB), got " + std::to_string(channels));
}

}  // namespace

namespace detail {

void set_max_decoded_bytes(int64_t bytes) { g_max_decoded_bytes.store(bytes); }

}  // namespace detail

VideoClip decode_video_file(const std::string& path, int64_t channels) {
  check_channels(channels, path);
  Fd fd;
  Source src = file_source(fd, path);
  return Decoder(path, channels).run(src);
}

VideoClip decode_video_bytes(const std::string& bytes, int64_t channels, const std::string& name) {
  check_channels(channels, name);
  Source src;
  src.data = reinterpret_cast<const uint8_t*>(bytes.data());
  src.size = static_cast<int64_t>(bytes.size());
  return Decoder(name, channels).run(src);
}

VideoInfo probe_video_file(const std::string& path) {
  Fd fd;
  Source src = file_source(fd, path);
  Input in;
  open_input(in, src, path);
  const int index = first_video_stream(in.fmt.get());
  if (index < 0) no_video_stream(path, in.fmt.get());
  const AVStream* st = in.fmt->streams[index];
  VideoInfo info;
  info.width = st->codecpar->width;
  info.height = st->codecpar->height;
  info.declared_frames = std::max<int64_t>(st->nb_frames, 0);
  info.fps = stream_fps(st);
  info.codec = avcodec_get_name(st->codecpar->codec_id);
  return info;
}

}  // namespace sparsevit::data
