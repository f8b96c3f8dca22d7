#include "data/ffmpeg_support.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

namespace sparsevit::data::ffmpeg {

namespace {

// ---- FFmpeg's log: kept per thread (the last error-level line), never printed ----------------

thread_local std::string t_last_error;
thread_local int t_print_prefix = 1;

void log_callback(void* avcl, int level, const char* fmt, va_list vl) {
  if ((level & 0xff) > AV_LOG_ERROR) return;
  char line[1024];
  av_log_format_line2(avcl, level, fmt, vl, line, sizeof(line), &t_print_prefix);
  std::string message(line);
  for (char& ch : message)
    if (ch == '\n' || ch == '\r') ch = ' ';
  while (!message.empty() && message.back() == ' ') message.pop_back();
  if (!message.empty()) t_last_error = message;
}

}  // namespace

void init_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    av_log_set_level(AV_LOG_QUIET);
    av_log_set_callback(&log_callback);
  });
}

std::string take_error() {
  std::string message;
  message.swap(t_last_error);
  return message;
}

std::string av_error(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  if (av_strerror(err, buf, sizeof(buf)) < 0) return "error " + std::to_string(err);
  return buf;
}

std::string describe(int err) {
  std::string text = av_error(err);
  const std::string log = take_error();
  if (!log.empty()) text += " (" + log + ")";
  return text;
}

std::unique_ptr<AVIOContext, IoDeleter> alloc_io(void* opaque, int write_flag,
                                                 int (*read_packet)(void*, uint8_t*, int),
                                                 int (*write_packet)(void*, WritePacketBuffer, int),
                                                 int64_t (*seek)(void*, int64_t, int)) {
  constexpr int kBufferSize = 1 << 16;
  auto* buffer = static_cast<uint8_t*>(av_malloc(kBufferSize));
  if (buffer == nullptr) return nullptr;
  std::unique_ptr<AVIOContext, IoDeleter> io(
      avio_alloc_context(buffer, kBufferSize, write_flag, opaque, read_packet, write_packet, seek));
  if (!io) av_free(buffer);
  return io;
}

int64_t seek_position(int64_t& pos, int64_t size, int64_t offset, int whence) {
  whence &= ~AVSEEK_FORCE;
  int64_t target;
  switch (whence) {
    case AVSEEK_SIZE: return size;
    case SEEK_SET: target = offset; break;
    case SEEK_CUR: target = pos + offset; break;
    case SEEK_END: target = size + offset; break;
    default: return AVERROR(EINVAL);
  }
  if (target < 0) return AVERROR(EINVAL);
  pos = target;
  return target;
}

int refuse_io_open(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) { return AVERROR(EPERM); }

}  // namespace sparsevit::data::ffmpeg
