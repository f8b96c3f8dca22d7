// Every file sparsevit writes (checkpoints, .npy scores, PNGs, JSON summaries, reports, configs)
// goes through this one writer, so a reader — or a run resumed after a crash — sees either the
// old file or the complete new one, never a part of it:
//   the bytes go to a temporary with a unique name in the same folder (mkstemp: concurrent
//   writers of one path never share it), are fsynced, the temporary is renamed over the path,
//   and the folder is fsynced so the rename itself survives a power cut.
// On any failure the temporary is removed, the old file is untouched, and a RuntimeError
// "cannot write PATH: why" is thrown. Standard library and POSIX only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sparsevit {

class AtomicFile {
 public:
  // Creates the temporary next to `path` (RuntimeError "... cannot create temporary file ...").
  explicit AtomicFile(std::string path);
  // Without commit() (an exception on the way), the temporary is removed.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Overwrites bytes already written (e.g. a header whose checksum is known only at the end).
  void write_at(std::uint64_t offset, const void* data, std::size_t size);
  // fsync, close, rename over the path, fsync the folder.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  [[noreturn]] void fail(const std::string& what, int error);
  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// The whole file at once.
void write_file_atomically(const std::string& path, std::string_view bytes);

namespace detail {
// Test hook: called with the temporary's path after it is written and synced, just before the
// rename. A hook that throws simulates a crash between write and rename. Empty to disable.
void set_before_rename_hook(std::function<void(const std::string& temp_path)> hook);
}  // namespace detail

}  // namespace sparsevit
