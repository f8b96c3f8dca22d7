// NumPy .npz archives (np.savez / np.savez_compressed: a zip of .npy members, stored or
// deflated), read and written through libzip, so pattern files move between Python and
// sparsevit without conversion. Members are typed arrays (util/npy_array.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "util/npy_array.h"

struct zip;  // libzip's archive handle; <zip.h> stays private to npz_file.cpp

namespace sparsevit {

class NpzReader {
 public:
  // Opens the archive (RuntimeError "<context>: '<path>' ..." when it is missing or not a zip).
  NpzReader(std::string path, std::string context);
  ~NpzReader();
  NpzReader(const NpzReader&) = delete;
  NpzReader& operator=(const NpzReader&) = delete;

  // Array names in archive order: member names with their ".npy" dropped, as np.load lists them.
  const std::vector<std::string>& members() const { return members_; }
  bool has(const std::string& name) const;
  // Decompresses and parses member `name` (RuntimeError naming file and member when it is absent,
  // corrupt — a bad CRC included — or not a supported .npy). Memory grows with the bytes actually
  // decompressed, never with a size the archive merely claims.
  NpyArray read(const std::string& name) const;

 private:
  std::string path_, context_;
  zip* archive_ = nullptr;
  std::vector<std::string> members_;
};

// Writes `arrays` as an .npz that np.load reads (members "<name>.npy"), deflated when `compress`
// (np.savez_compressed) or stored (np.savez); atomically, like every file sparsevit writes.
void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& arrays, bool compress);

}  // namespace sparsevit
