#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "util/errors.h"

namespace sparsevit {
namespace {

std::function<void(const std::string&)>& before_rename_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), temp_(path_ + ".tmp.XXXXXX") {
  fd_ = ::mkstemp(temp_.data());
  if (fd_ < 0) {
    const int err = errno;
    throw RuntimeError("cannot write " + path_ + ": cannot create temporary file " + temp_ + ": " + std::strerror(err));
  }
  (void)::fchmod(fd_, 0644);  // mkstemp creates 0600; results are for sharing
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_.c_str());
}

void AtomicFile::fail(const std::string& what, int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_.c_str());
  committed_ = true;  // nothing left to clean up
  throw RuntimeError("cannot write " + path_ + ": " + what + (error != 0 ? std::string(": ") + std::strerror(error) : ""));
}

void AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw RuntimeError("cannot write " + path_ + ": the file is already closed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing " + temp_, n < 0 ? errno : EIO);
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::write_at(std::uint64_t offset, const void* data, std::size_t size) {
  if (fd_ < 0) throw RuntimeError("cannot write " + path_ + ": the file is already closed");
  if (::pwrite(fd_, data, size, static_cast<off_t>(offset)) != static_cast<ssize_t>(size))
    fail("writing " + temp_, errno != 0 ? errno : EIO);
}

void AtomicFile::commit() {
  if (fd_ < 0) throw RuntimeError("cannot write " + path_ + ": the file is already closed");
  if (::fsync(fd_) != 0) fail("syncing " + temp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("closing " + temp_, errno);
  try {
    if (before_rename_hook()) before_rename_hook()(temp_);
  } catch (...) {
    ::unlink(temp_.c_str());
    committed_ = true;
    throw;
  }
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) fail("renaming " + temp_ + " to it", errno);
  committed_ = true;
  // Make the rename itself durable (best effort: some file systems refuse to sync folders).
  const int dir = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

namespace detail {
void set_before_rename_hook(std::function<void(const std::string&)> hook) { before_rename_hook() = std::move(hook); }
}  // namespace detail

}  // namespace sparsevit
