// util/npz_file.h in the Python package's core, which is built without libzip (it needs only
// torch, a compiler, CMake and Python: docs/python.md). Reading or writing an .npz there is a
// one-line error pointing at the CLI build; .npy files (util/npy_file.h) work in both builds.
#include <string>
#include <utility>
#include <vector>

#include "util/errors.h"
#include "util/npz_file.h"

namespace sparsevit {
namespace {

[[noreturn]] void needs_cli_build(const std::string& context, const std::string& path, const char* what) {
  throw RuntimeError(context + ": " + what + " '" + path + "' needs the CLI build: sparsevit's Python package is " +
                     "built without libzip (use a bool .npy mask [L, H, N, N], or the `sparsevit` CLI built with " +
                     "CMake, docs/building.md)");
}

}  // namespace

NpzReader::NpzReader(std::string path, std::string context) : path_(std::move(path)), context_(std::move(context)) {
  needs_cli_build(context_, path_, "reading .npz");
}

NpzReader::~NpzReader() = default;

bool NpzReader::has(const std::string&) const { return false; }

NpyArray NpzReader::read(const std::string&) const { needs_cli_build(context_, path_, "reading .npz"); }

void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>&, bool) {
  needs_cli_build("write_npz", path, "writing .npz");
}

}  // namespace sparsevit
