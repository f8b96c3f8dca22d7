#include "data/video_decoder.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>
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
#include <optional>
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

// The stream's average frame rate, else its real base rate; {0, 1} when it declares neither.
AVRational stream_rate(const AVStream* st) {
  for (AVRational r : {st->avg_frame_rate, st->r_frame_rate}) {
    if (r.num > 0 && r.den > 0) {
      const double fps = av_q2d(r);
      if (std::isfinite(fps) && fps > 0) return r;
    }
  }
  return AVRational{0, 1};
}

double stream_fps(const AVStream* st) {
  const AVRational rate = stream_rate(st);
  return rate.num > 0 ? av_q2d(rate) : 30.0;
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

// Decodes and converts the frames of the first video stream: all of them (decode_all), or,
// after a seek, only a window of them (decode_window).
class Decoder {
 public:
  Decoder(std::string name, int64_t channels) : name_(std::move(name)), channels_(channels) {}

  // Opens the container and the stream's decoder; errors as decode_video_file.
  void open(Source& src) {
    open_input(in_, src, name_);
    file_size_ = src.size;
    AVFormatContext* fmt = in_.fmt.get();
    index_ = first_video_stream(fmt);
    if (index_ < 0) no_video_stream(name_, fmt);
    for (unsigned i = 0; i < fmt->nb_streams; ++i)
      if (static_cast<int>(i) != index_) fmt->streams[i]->discard = AVDISCARD_ALL;
    st_ = fmt->streams[index_];
    const AVCodec* codec = avcodec_find_decoder(st_->codecpar->codec_id);
    if (codec == nullptr) fail(name_, std::string("unsupported video codec ") + avcodec_get_name(st_->codecpar->codec_id));
    check_size(name_, st_->codecpar->width, st_->codecpar->height);

    ctx_.reset(avcodec_alloc_context3(codec));
    if (!ctx_) fail(name_, "out of memory");
    int err = avcodec_parameters_to_context(ctx_.get(), st_->codecpar);
    if (err < 0) fail(name_, "cannot set up the " + std::string(codec->name) + " decoder: " + describe(err));
    ctx_->thread_count = 1;  // the data loader runs decoders in parallel already
    ctx_->pkt_timebase = st_->time_base;
    err = avcodec_open2(ctx_.get(), codec, nullptr);
    if (err < 0) fail(name_, "cannot open the " + std::string(codec->name) + " decoder: " + describe(err));

    packet_.reset(av_packet_alloc());
    frame_.reset(av_frame_alloc());
    converted_.reset(av_frame_alloc());
    if (!packet_ || !frame_ || !converted_) fail(name_, "out of memory");
  }

  double fps() const { return stream_fps(st_); }

  // Every frame, in presentation order.
  VideoClip decode_all() {
    AVFormatContext* fmt = in_.fmt.get();
    while (true) {
      int err = av_read_frame(fmt, packet_.get());
      if (err == AVERROR_EOF) break;
      if (err < 0) corrupt(err);
      if (packet_->stream_index == index_) {
        // A packet the demuxer could only read in part (the file ends inside it).
        if (packet_->flags & AV_PKT_FLAG_CORRUPT) corrupt(AVERROR_INVALIDDATA, "a packet is cut short");
        err = avcodec_send_packet(ctx_.get(), packet_.get());
        av_packet_unref(packet_.get());
        if (err < 0) corrupt(err);
        receive();
      } else {
        av_packet_unref(packet_.get());
      }
    }
    const int err = avcodec_send_packet(ctx_.get(), nullptr);  // flush: the frames the decoder still holds
    if (err < 0 && err != AVERROR_EOF) corrupt(err);
    receive();

    if (frames_.empty()) fail(name_, "no decodable video frames");
    VideoClip clip;
    clip.fps = fps();
    clip.frames = assemble();
    return clip;
  }

  // The frame count the container declares when a window of it can be decoded by seeking, else
  // 0. Trusted only when it is consistent with the stream's duration and rate, and the
  // container indexes every frame inside the file (MP4 / MOV, AVI with its index; Matroska
  // declares no count, and a cut file loses its index or points past its end).
  int64_t windowable_frames() const {
    const int64_t declared = st_->nb_frames;
    const AVRational rate = stream_rate(st_);
    if (declared <= 0 || declared > kMaxFrames || rate.num <= 0 || st_->start_time == AV_NOPTS_VALUE ||
        st_->duration == AV_NOPTS_VALUE || st_->duration <= 0 || st_->codecpar->width <= 0 ||
        st_->codecpar->height <= 0 || st_->time_base.num <= 0 || st_->time_base.den <= 0)
      return 0;
    // The duration spans the declared frames at the declared rate (to half a frame).
    const double duration_frames = static_cast<double>(st_->duration) * av_q2d(st_->time_base) * av_q2d(rate);
    if (!(std::fabs(duration_frames - static_cast<double>(declared)) <= 0.5)) return 0;
    const int entries = avformat_index_get_entries_count(st_);
    int64_t indexed = 0, keyframes = 0;
    for (int i = 0; i < entries; ++i) {
      const AVIndexEntry* e = avformat_index_get_entry(st_, i);
      if (e == nullptr || (e->flags & AVINDEX_DISCARD_FRAME)) continue;
      if (e->pos < 0 || e->size < 0 || e->pos + e->size > file_size_) return 0;
      ++indexed;
      if (e->flags & AVINDEX_KEYFRAME) ++keyframes;
    }
    return indexed == declared && keyframes > 0 ? declared : 0;
  }

  // Decodes the frames `wanted` (sorted, distinct, in [0, video_frames)) by seeking to the
  // keyframe at or before the first and decoding forward to the last. A frame's index is its
  // presentation timestamp's: round((pts - start_time) * time_base * rate). False, with nothing
  // returned, when the stream does not behave as its container declared (the seek lands after
  // the window even from the start, frame indices that do not follow one another, a frame past
  // the declared count, a frame of another size, any error): the caller then decodes it all.
  bool decode_window(const std::vector<int64_t>& wanted, int64_t video_frames, VideoClip& out) {
    try {
      if (!find_window(wanted, video_frames)) return false;
    } catch (const RuntimeError&) {
      return false;  // the whole decode reports it, with its frame count
    }
    out.fps = fps();
    out.frames = assemble();
    return true;
  }

 private:
  [[noreturn]] void corrupt(int err, const std::string& why = "") {
    fail(name_, "truncated or corrupt video: " + (why.empty() ? describe(err) : why) + " after " +
                    std::to_string(frames_.size()) + " frames");
  }

  void receive() {
    while (true) {
      const int err = avcodec_receive_frame(ctx_.get(), frame_.get());
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
    if (width_ == 0) {
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

  // The frame index of a decoded frame's timestamp; -1 when it has none.
  int64_t frame_index(int64_t pts) const {
    if (pts == AV_NOPTS_VALUE) return -1;
    return av_rescale_q_rnd(pts - st_->start_time, st_->time_base, av_inv_q(stream_rate(st_)),
                            static_cast<AVRounding>(AV_ROUND_NEAR_INF | AV_ROUND_PASS_MINMAX));
  }

  enum class Pass { kDone, kSeekEarlier, kUntrusted };

  bool find_window(const std::vector<int64_t>& wanted, int64_t video_frames) {
    const AVRational frame_step = av_inv_q(stream_rate(st_));
    // The first wanted frame's timestamp; moved back when a seek lands after it (a keyframe
    // indexed by its decoding time, a stream whose timestamps start late).
    for (int64_t back = 0;; back = back == 0 ? 16 : back * 4) {
      const int64_t from = std::max<int64_t>(wanted.front() - back, 0);
      if (from > 0 || back > 0) {
        const int64_t ts = st_->start_time + av_rescale_q(from, frame_step, st_->time_base);
        if (av_seek_frame(in_.fmt.get(), index_, ts, AVSEEK_FLAG_BACKWARD) < 0) return false;
        avcodec_flush_buffers(ctx_.get());
      }  // else: still at the start of the file (nothing decoded yet), no seek needed
      frames_.clear();
      const Pass pass = decode_from_here(wanted, video_frames);
      if (pass == Pass::kDone) return true;
      if (pass == Pass::kUntrusted || from == 0) return false;
    }
  }

  // Decodes from the current position, keeping the wanted frames.
  Pass decode_from_here(const std::vector<int64_t>& wanted, int64_t video_frames) {
    AVFormatContext* fmt = in_.fmt.get();
    int64_t previous = -1;
    std::size_t next = 0;  // the next wanted frame
    bool draining = false;
    // Every frame the decoder returns: its index must follow the previous one's.
    auto take_frames = [&]() -> std::optional<Pass> {
      while (true) {
        const int err = avcodec_receive_frame(ctx_.get(), frame_.get());
        if (err == AVERROR(EAGAIN) || err == AVERROR_EOF) return std::nullopt;
        if (err < 0) return Pass::kUntrusted;
        const int64_t t = frame_index(frame_->best_effort_timestamp);
        const bool ok_size = frame_->width == st_->codecpar->width && frame_->height == st_->codecpar->height;
        if (t < 0 || t >= video_frames || !ok_size || (frame_->flags & AV_FRAME_FLAG_CORRUPT)) {
          av_frame_unref(frame_.get());
          return Pass::kUntrusted;
        }
        if (previous < 0 && t > wanted.front()) {
          av_frame_unref(frame_.get());
          return Pass::kSeekEarlier;
        }
        if (previous >= 0 && t != previous + 1) {
          av_frame_unref(frame_.get());
          return Pass::kUntrusted;
        }
        previous = t;
        if (draining) {  // a frame after the last declared one: the count is wrong
          av_frame_unref(frame_.get());
          return Pass::kUntrusted;
        }
        if (next < wanted.size() && t == wanted[next]) {
          convert(*frame_);
          ++next;
        }
        av_frame_unref(frame_.get());
        if (next == wanted.size()) {
          // Past the window. Unless it ends at the last declared frame, which must then be the last.
          if (t < video_frames - 1) return Pass::kDone;
          draining = true;
        }
      }
    };
    while (true) {
      int err = av_read_frame(fmt, packet_.get());
      if (err == AVERROR_EOF) break;
      if (err < 0) return Pass::kUntrusted;
      if (packet_->stream_index != index_) {
        av_packet_unref(packet_.get());
        continue;
      }
      if (packet_->flags & AV_PKT_FLAG_CORRUPT) {
        av_packet_unref(packet_.get());
        return Pass::kUntrusted;
      }
      err = avcodec_send_packet(ctx_.get(), packet_.get());
      av_packet_unref(packet_.get());
      if (err < 0) return Pass::kUntrusted;
      if (const auto pass = take_frames()) return *pass;
    }
    const int err = avcodec_send_packet(ctx_.get(), nullptr);
    if (err < 0 && err != AVERROR_EOF) return Pass::kUntrusted;
    if (const auto pass = take_frames()) return *pass;
    // The end of the stream: complete only if every wanted frame came and the last was T - 1.
    return next == wanted.size() && previous == video_frames - 1 ? Pass::kDone : Pass::kUntrusted;
  }

  std::string name_;
  int64_t channels_;
  Input in_;
  int64_t file_size_ = 0;
  int index_ = -1;
  AVStream* st_ = nullptr;  // non-const: FFmpeg's index accessors take it so
  std::unique_ptr<AVCodecContext, CodecDeleter> ctx_;
  std::unique_ptr<AVPacket, PacketDeleter> packet_;
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

Source bytes_source(const std::string& bytes) {
  Source src;
  src.data = reinterpret_cast<const uint8_t*>(bytes.data());
  src.size = static_cast<int64_t>(bytes.size());
  return src;
}

// The picker's indices, checked against the frame count it was given.
std::vector<int64_t> pick_checked(const FramePicker& pick, int64_t video_frames, double fps, const std::string& name) {
  std::vector<int64_t> indices = pick(video_frames, fps);
  if (indices.empty()) throw RuntimeError(name + ": the frame picker chose no frame");
  for (int64_t i : indices)
    if (i < 0 || i >= video_frames)
      throw RuntimeError(name + ": the frame picker chose frame " + std::to_string(i) + " of " +
                         std::to_string(video_frames));
  return indices;
}

// The positions of `indices` in `sorted` (which holds each of them once).
at::Tensor positions_in(const std::vector<int64_t>& sorted, const std::vector<int64_t>& indices) {
  std::vector<int64_t> positions;
  positions.reserve(indices.size());
  for (int64_t i : indices)
    positions.push_back(std::lower_bound(sorted.begin(), sorted.end(), i) - sorted.begin());
  return at::tensor(at::ArrayRef<int64_t>(positions), at::TensorOptions().dtype(at::kLong));
}

PickedFrames decode_picked(Source& src, const std::string& name, int64_t channels, const FramePicker& pick) {
  const int64_t start = src.pos;
  VideoClip whole;
  {
    Decoder decoder(name, channels);
    decoder.open(src);
    const int64_t declared = decoder.windowable_frames();
    if (declared == 0) {
      whole = decoder.decode_all();
    } else {
      const std::vector<int64_t> indices = pick_checked(pick, declared, decoder.fps(), name);
      std::vector<int64_t> wanted = indices;
      std::sort(wanted.begin(), wanted.end());
      wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
      VideoClip window;
      if (decoder.decode_window(wanted, declared, window))
        return PickedFrames{window.frames.index_select(1, positions_in(wanted, indices)), window.fps, declared, true};
    }
  }
  if (!whole.frames.defined()) {  // the window could not be trusted: decode it all from the start
    src.pos = start;
    Decoder decoder(name, channels);
    decoder.open(src);
    whole = decoder.decode_all();
  }
  const int64_t video_frames = whole.frames.size(1);
  const std::vector<int64_t> indices = pick_checked(pick, video_frames, whole.fps, name);
  const at::Tensor index = at::tensor(at::ArrayRef<int64_t>(indices), at::TensorOptions().dtype(at::kLong));
  return PickedFrames{whole.frames.index_select(1, index), whole.fps, video_frames, false};
}

}  // namespace

namespace detail {

void set_max_decoded_bytes(int64_t bytes) { g_max_decoded_bytes.store(bytes); }

}  // namespace detail

VideoClip decode_video_file(const std::string& path, int64_t channels) {
  check_channels(channels, path);
  Fd fd;
  Source src = file_source(fd, path);
  Decoder decoder(path, channels);
  decoder.open(src);
  return decoder.decode_all();
}

VideoClip decode_video_bytes(const std::string& bytes, int64_t channels, const std::string& name) {
  check_channels(channels, name);
  Source src = bytes_source(bytes);
  Decoder decoder(name, channels);
  decoder.open(src);
  return decoder.decode_all();
}

PickedFrames decode_video_frames(const std::string& path, int64_t channels, const FramePicker& pick) {
  check_channels(channels, path);
  Fd fd;
  Source src = file_source(fd, path);
  return decode_picked(src, path, channels, pick);
}

PickedFrames decode_video_bytes_frames(const std::string& bytes, int64_t channels, const std::string& name,
                                       const FramePicker& pick) {
  check_channels(channels, name);
  Source src = bytes_source(bytes);
  return decode_picked(src, name, channels, pick);
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
