#include "util/file_bytes.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "util/errors.h"

namespace sparsevit {
namespace {

[[noreturn]] void refuse_longer(const std::string& path, uint64_t max_bytes) {
  throw RuntimeError(path + ": longer than the " + std::to_string(max_bytes) + " bytes expected");
}

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  return read_file_bytes(path, std::numeric_limits<uint64_t>::max());
}

std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t max_bytes) {
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw RuntimeError(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  // A regular file's size is a good first guess (/proc files say 0; others are read to the end).
  struct stat st {};
  if (::fstat(fileno(file.get()), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    if (static_cast<uint64_t>(st.st_size) > max_bytes) refuse_longer(path, max_bytes);
    bytes.reserve(static_cast<std::size_t>(st.st_size));
  }
  uint8_t buffer[1 << 16];
  while (true) {
    const std::size_t n = std::fread(buffer, 1, sizeof(buffer), file.get());
    if (n > max_bytes - bytes.size()) refuse_longer(path, max_bytes);  // it grew since fstat
    bytes.insert(bytes.end(), buffer, buffer + n);
    if (n < sizeof(buffer)) {
      if (std::ferror(file.get())) throw RuntimeError(path + ": cannot read: " + std::strerror(errno));
      break;
    }
  }
  return bytes;
}

}  // namespace sparsevit
