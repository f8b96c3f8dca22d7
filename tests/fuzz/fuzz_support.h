// Shared by the libFuzzer harnesses: the input as a file (parsers that read paths), removed again.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sparsevit::fuzz {

// A per-process unique temporary file holding `size` bytes; deleted with the object.
class TempFile {
 public:
  TempFile(const uint8_t* data, size_t size, const char* suffix = "") {
    std::string pattern = std::string(P_tmpdir) + "/sparsevit_fuzz_XXXXXX" + suffix;
    const int fd = ::mkstemps(pattern.data(), static_cast<int>(std::string(suffix).size()));
    if (fd < 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    path_ = pattern;
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace sparsevit::fuzz
