#include "util/npz_file.h"

#include <zip.h>

#include <algorithm>
#include <memory>

#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit {

namespace {

constexpr const char* kSuffix = ".npy";
constexpr std::size_t kChunk = std::size_t{1} << 20;

std::string error_text(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

bool ends_with_suffix(const std::string& name) {
  const std::size_t n = std::char_traits<char>::length(kSuffix);
  return name.size() >= n && name.compare(name.size() - n, n, kSuffix) == 0;
}

}  // namespace

NpzReader::NpzReader(std::string path, std::string context) : path_(std::move(path)), context_(std::move(context)) {
  int code = 0;
  archive_ = zip_open(path_.c_str(), ZIP_RDONLY, &code);
  if (!archive_) {
    if (code == ZIP_ER_NOENT || code == ZIP_ER_OPEN)
      throw RuntimeError(context_ + ": cannot open '" + path_ + "'");
    throw RuntimeError(context_ + ": '" + path_ + "' is not a readable .npz (zip) archive: " + error_text(code));
  }
  const zip_int64_t entries = zip_get_num_entries(archive_, 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    const char* raw = zip_get_name(archive_, static_cast<zip_uint64_t>(i), 0);
    if (!raw) continue;
    std::string name = raw;
    if (ends_with_suffix(name)) name.resize(name.size() - std::char_traits<char>::length(kSuffix));
    members_.push_back(std::move(name));
  }
}

NpzReader::~NpzReader() {
  if (archive_) zip_discard(archive_);  // read-only: nothing to write back
}

bool NpzReader::has(const std::string& name) const {
  return std::find(members_.begin(), members_.end(), name) != members_.end();
}

NpyArray NpzReader::read(const std::string& name) const {
  const std::string where = context_ + ": '" + path_ + "' member '" + name + "'";
  zip_int64_t index = zip_name_locate(archive_, (name + kSuffix).c_str(), 0);
  if (index < 0) index = zip_name_locate(archive_, name.c_str(), 0);
  if (index < 0) {
    std::string listed;
    for (const auto& m : members_) listed += (listed.empty() ? "" : ", ") + m;
    throw RuntimeError(context_ + ": '" + path_ + "' has no array '" + name + "' (it holds: " +
                       (listed.empty() ? "nothing" : listed) + ")");
  }
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat_index(archive_, static_cast<zip_uint64_t>(index), 0, &stat) != 0 || !(stat.valid & ZIP_STAT_SIZE))
    throw RuntimeError(where + " has no readable size: " + zip_strerror(archive_));
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> file(zip_fopen_index(archive_, static_cast<zip_uint64_t>(index), 0),
                                                         zip_fclose);
  if (!file) throw RuntimeError(where + " cannot be read: " + zip_strerror(archive_));
  // Grow with the data that actually arrives: a tiny archive may claim a huge member.
  std::vector<uint8_t> bytes;
  for (;;) {
    const std::size_t old = bytes.size();
    bytes.resize(old + kChunk);
    const zip_int64_t got = zip_fread(file.get(), bytes.data() + old, kChunk);
    if (got < 0) throw RuntimeError(where + " is corrupt: " + zip_file_strerror(file.get()));
    bytes.resize(old + static_cast<std::size_t>(got));
    if (got == 0) break;
    if (bytes.size() > stat.size) break;  // more than the archive declared: refused below
  }
  if (bytes.size() != stat.size)
    throw RuntimeError(where + " decompresses to " + std::to_string(bytes.size()) + " bytes, the archive declares " +
                       std::to_string(stat.size));
  return parse_npy_array(bytes.data(), bytes.size(), where);
}

void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& arrays, bool compress) {
  // The archive is built in memory and written through AtomicFile (no half-written file).
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (!buffer) throw RuntimeError("cannot write '" + path + "': " + zip_error_strerror(&error));
  zip_source_keep(buffer);  // survives zip_close, which writes the archive into it
  std::unique_ptr<zip_source_t, void (*)(zip_source_t*)> keep(buffer, zip_source_free);
  zip_t* archive = zip_open_from_source(buffer, ZIP_TRUNCATE, &error);
  if (!archive) throw RuntimeError("cannot write '" + path + "': " + zip_error_strerror(&error));
  std::vector<std::string> members;  // libzip reads the member bytes at zip_close
  members.reserve(arrays.size());
  for (const auto& [name, array] : arrays) {
    members.push_back(npy_array_bytes(array));
    zip_source_t* data = zip_source_buffer(archive, members.back().data(), members.back().size(), 0);
    const zip_int64_t index = data ? zip_file_add(archive, (name + kSuffix).c_str(), data, ZIP_FL_ENC_UTF_8) : -1;
    if (index < 0) {
      if (data) zip_source_free(data);
      const std::string why = zip_strerror(archive);
      zip_discard(archive);
      throw RuntimeError("cannot write '" + path + "': " + why);
    }
    zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(archive) != 0) {
    const std::string why = zip_strerror(archive);
    zip_discard(archive);
    throw RuntimeError("cannot write '" + path + "': " + why);
  }
  zip_stat_t stat;
  if (zip_source_stat(buffer, &stat) != 0 || zip_source_open(buffer) != 0)
    throw RuntimeError("cannot write '" + path + "': " + zip_error_strerror(zip_source_error(buffer)));
  std::string bytes(static_cast<std::size_t>(stat.size), '\0');
  const zip_int64_t got = zip_source_read(buffer, bytes.data(), bytes.size());
  zip_source_close(buffer);
  if (got != static_cast<zip_int64_t>(bytes.size())) throw RuntimeError("cannot write '" + path + "': short archive");
  AtomicFile out(path);
  out.write(bytes);
  out.commit();
}

}  // namespace sparsevit
