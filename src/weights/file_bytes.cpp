#include "weights/file_bytes.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/errors.h"

namespace sparsevit::weights {

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw RuntimeError(path + ": cannot read (not a regular file?)");
  in.seekg(0, std::ios::beg);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), size)) throw RuntimeError(path + ": cannot read the whole file");
  return bytes;
}

}  // namespace sparsevit::weights
