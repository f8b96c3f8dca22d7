#include "weights/zip_records.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "util/errors.h"
#include "weights/printable.h"

namespace sparsevit::weights {
namespace {

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::vector<uint8_t> read_at(const caffe2::serialize::ReadAdapterInterface& in, uint64_t pos, uint64_t n,
                             const std::string& source) {
  if (pos > in.size() || n > in.size() - pos) throw RuntimeError(source + ": zip structure points outside the file");
  std::vector<uint8_t> out(static_cast<size_t>(n));
  if (n > 0 && in.read(pos, out.data(), static_cast<size_t>(n), "zip directory") != n)
    throw RuntimeError(source + ": cannot read the zip directory");
  return out;
}

}  // namespace

void check_zip_record_sizes(const caffe2::serialize::ReadAdapterInterface& in, const std::string& source) {
  const uint64_t size = in.size();
  if (size < 22) throw RuntimeError(source + ": not a zip archive (" + std::to_string(size) + " bytes)");
  const uint64_t tail_size = std::min<uint64_t>(size, 65535 + 22);
  const std::vector<uint8_t> tail = read_at(in, size - tail_size, tail_size, source);
  int64_t eocd = -1;  // the last end-of-central-directory signature, as zip readers search for it
  for (int64_t i = static_cast<int64_t>(tail_size) - 22; i >= 0; --i)
    if (le(&tail[static_cast<size_t>(i)], 4) == 0x06054b50) { eocd = i; break; }
  if (eocd < 0) throw RuntimeError(source + ": not a zip archive (no end of central directory)");
  const uint8_t* e = &tail[static_cast<size_t>(eocd)];
  uint64_t entries = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
  if (entries == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    const uint64_t eocd_pos = size - tail_size + static_cast<uint64_t>(eocd);
    if (eocd_pos < 20) throw RuntimeError(source + ": zip64 archive without its locator");
    const std::vector<uint8_t> locator = read_at(in, eocd_pos - 20, 20, source);
    if (le(locator.data(), 4) != 0x07064b50) throw RuntimeError(source + ": zip64 archive without its locator");
    const std::vector<uint8_t> z = read_at(in, le(locator.data() + 8, 8), 56, source);
    if (le(z.data(), 4) != 0x06064b50) throw RuntimeError(source + ": zip64 end of central directory not found");
    entries = le(z.data() + 32, 8), cd_size = le(z.data() + 40, 8), cd_offset = le(z.data() + 48, 8);
  }
  const std::vector<uint8_t> cd = read_at(in, cd_offset, cd_size, source);
  size_t pos = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    if (cd.size() - pos < 46 || le(&cd[pos], 4) != 0x02014b50)
      throw RuntimeError(source + ": zip central directory is damaged");
    const uint8_t* h = &cd[pos];
    const uint64_t method = le(h + 10, 2), name_len = le(h + 28, 2), extra_len = le(h + 30, 2), comment_len = le(h + 32, 2);
    uint64_t comp = le(h + 20, 4), uncomp = le(h + 24, 4);
    if (cd.size() - pos - 46 < name_len + extra_len + comment_len)
      throw RuntimeError(source + ": zip central directory is damaged");
    const std::string name(reinterpret_cast<const char*>(h + 46), name_len);
    // Zip64 extra field (id 1): the 8-byte sizes that were 0xffffffff above, uncompressed first.
    const uint8_t* x = h + 46 + name_len;
    for (uint64_t at = 0; at + 4 <= extra_len;) {
      const uint64_t id = le(x + at, 2), len = le(x + at + 2, 2);
      if (at + 4 + len > extra_len) break;
      if (id == 1) {
        uint64_t field = at + 4;
        if (uncomp == 0xffffffff && field + 8 <= at + 4 + len) uncomp = le(x + field, 8), field += 8;
        if (comp == 0xffffffff && field + 8 <= at + 4 + len) comp = le(x + field, 8);
      }
      at += 4 + len;
    }
    const bool fits = method == 0 ? uncomp <= size && comp <= size
                                  : comp <= size && uncomp / 1100 <= comp + 1;
    if (!fits)
      throw RuntimeError(source + ": zip record '" + printable(name) + "' claims " + std::to_string(uncomp) +
                         " bytes, more than the archive can hold");
    pos += 46 + name_len + extra_len + comment_len;
  }
}

}  // namespace sparsevit::weights
