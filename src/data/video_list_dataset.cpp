#include "data/video_list_dataset.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "data/image_codec.h"
#include "data/video_decoder.h"
#include "util/errors.h"
#include "util/text.h"

namespace sparsevit::data {
namespace fs = std::filesystem;
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read the annotation list " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_frame_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// Natural order: digit runs compare by value, so frame_2 comes before frame_10.
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      std::string da = a.substr(i, ie - i), db = b.substr(j, je - j);
      da.erase(0, std::min(da.find_first_not_of('0'), da.size()));
      db.erase(0, std::min(db.find_first_not_of('0'), db.size()));
      if (da.size() != db.size()) return da.size() < db.size();
      if (da != db) return da < db;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

int64_t max_label_in(const std::string& path, const std::string& dir) {
  int64_t m = -1;
  for (const auto& e : parse_video_list(read_text(path), path, dir)) m = std::max(m, e.label);
  return m;
}

}  // namespace

std::vector<VideoListEntry> parse_video_list(const std::string& text, const std::string& source,
                                             const std::string& base_dir) {
  std::vector<VideoListEntry> entries;
  std::istringstream lines(text);
  std::string raw;
  int64_t line_number = 0;
  while (std::getline(lines, raw)) {
    ++line_number;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = source + ":" + std::to_string(line_number);
    if (line.find('\0') != std::string::npos) throw UsageError(where + ": a NUL byte in the line");
    const std::size_t split = line.find_last_of(" \t,");
    if (split == std::string::npos) throw UsageError(where + ": expected 'PATH LABEL', got '" + line + "'");
    const std::string path = trim(line.substr(0, split)), label = line.substr(split + 1);
    if (path.empty()) throw UsageError(where + ": expected 'PATH LABEL', got '" + line + "'");
    const bool digits = !label.empty() && label.size() <= 9 &&
                        std::all_of(label.begin(), label.end(), [](unsigned char ch) { return std::isdigit(ch); });
    if (!digits) throw UsageError(where + ": label '" + label + "' is not a class index (0, 1, 2, ...)");
    VideoListEntry e;
    e.path = fs::path(path).is_absolute() || base_dir.empty() ? path : (fs::path(base_dir) / path).string();
    e.label = std::stoll(label);
    entries.push_back(std::move(e));
  }
  return entries;
}

std::string video_list_path(const std::string& dir, bool train) {
  std::error_code ec;
  for (const char* name : train ? std::vector<const char*>{"train.csv"} : std::vector<const char*>{"test.csv", "val.csv"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  throw UsageError(dir + " has no " + (train ? "train.csv" : "test.csv or val.csv") +
                   " (TimeSformer's annotation lists: one 'PATH LABEL' per line)");
}

VideoListDataset::VideoListDataset(const std::string& dir, bool train, int64_t channels)
    : list_path_(video_list_path(dir, train)), channels_(channels) {
  if (channels != 1 && channels != 3) throw UsageError("video channels must be 1 or 3");
  entries_ = parse_video_list(read_text(list_path_), list_path_, dir);
  if (entries_.empty()) throw UsageError(list_path_ + " lists no clip");
  std::vector<std::string> missing;
  std::error_code ec;
  for (const auto& e : entries_)
    if (!fs::exists(e.path, ec)) missing.push_back(e.path);
  if (!missing.empty())
    throw UsageError(list_path_ + ": " + std::to_string(missing.size()) + " listed clip(s) do not exist, e.g. " +
                     missing.front());
  int64_t max_label = -1;
  for (const char* name : {"train.csv", "val.csv", "test.csv"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p, ec)) max_label = std::max(max_label, max_label_in(p.string(), dir));
  }
  num_classes_ = max_label + 1;
}

VideoClip VideoListDataset::clip(int64_t index) const {
  if (index < 0 || index >= size())
    throw RuntimeError("clip index " + std::to_string(index) + " out of range for " + describe());
  const std::string& path = entries_[static_cast<std::size_t>(index)].path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return read_frame_folder(path, channels_);
  return decode_video_file(path, channels_);
}

PickedFrames VideoListDataset::picked_frames(int64_t index, const FramePicker& pick) const {
  if (index < 0 || index >= size())
    throw RuntimeError("clip index " + std::to_string(index) + " out of range for " + describe());
  const std::string& path = entries_[static_cast<std::size_t>(index)].path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return read_frame_folder_frames(path, channels_, pick);
  return decode_video_frames(path, channels_, pick);
}

int64_t VideoListDataset::label(int64_t index) const {
  if (index < 0 || index >= size())
    throw RuntimeError("clip index " + std::to_string(index) + " out of range for " + describe());
  return entries_[static_cast<std::size_t>(index)].label;
}

std::string VideoListDataset::describe() const {
  return list_path_ + ": " + std::to_string(size()) + " clips, " + std::to_string(num_classes_) + " classes";
}

namespace {

// The folder's frame files in natural order; RuntimeError when it has none.
std::vector<std::string> frame_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && is_frame_file(entry.path())) files.push_back(entry.path().filename().string());
  if (ec) throw RuntimeError("cannot list the frame folder " + dir + ": " + ec.message());
  if (files.empty()) throw RuntimeError("frame folder " + dir + " has no .jpg/.jpeg/.png frame");
  std::sort(files.begin(), files.end(), natural_less);
  return files;
}

// One frame as uint8 [C, H, W]; RuntimeError when its size is not the first frame's (first: [C, H, W]
// or undefined for the first frame itself).
at::Tensor read_folder_frame(const std::string& dir, const std::string& name, int64_t channels, const at::Tensor& first) {
  const std::string path = (fs::path(dir) / name).string();
  const Image image = read_image(path, static_cast<int>(channels));
  const at::Tensor hwc =
      at::from_blob(const_cast<uint8_t*>(image.pixels.data()), {image.height, image.width, image.channels}, at::kByte);
  if (first.defined() && (first.size(1) != image.height || first.size(2) != image.width))
    throw RuntimeError(path + ": frame is " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                       ", the folder's first frame " + std::to_string(first.size(2)) + "x" +
                       std::to_string(first.size(1)));
  return hwc.permute({2, 0, 1}).clone();
}

}  // namespace

VideoClip read_frame_folder(const std::string& dir, int64_t channels, double fps) {
  const std::vector<std::string> files = frame_files(dir);
  std::vector<at::Tensor> frames;
  for (const auto& name : files)
    frames.push_back(read_folder_frame(dir, name, channels, frames.empty() ? at::Tensor() : frames.front()));
  return VideoClip{at::stack(frames, 1), fps};  // [C, T, H, W]
}

PickedFrames read_frame_folder_frames(const std::string& dir, int64_t channels, const FramePicker& pick, double fps) {
  const std::vector<std::string> files = frame_files(dir);
  const auto count = static_cast<int64_t>(files.size());
  const std::vector<int64_t> indices = pick(count, fps);
  if (indices.empty()) throw RuntimeError(dir + ": the frame picker chose no frame");
  for (int64_t i : indices)
    if (i < 0 || i >= count)
      throw RuntimeError(dir + ": the frame picker chose frame " + std::to_string(i) + " of " + std::to_string(count));
  const at::Tensor first = read_folder_frame(dir, files.front(), channels, at::Tensor());
  std::map<int64_t, at::Tensor> read{{0, first}};
  std::vector<at::Tensor> frames;
  for (int64_t i : indices) {
    auto it = read.find(i);
    if (it == read.end())
      it = read.emplace(i, read_folder_frame(dir, files[static_cast<std::size_t>(i)], channels, first)).first;
    frames.push_back(it->second);
  }
  return PickedFrames{at::stack(frames, 1), fps, count, true};
}

}  // namespace sparsevit::data
