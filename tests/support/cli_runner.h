// Runs the `sparsevit` binary as a user would, for the end-to-end suites: a temporary folder,
// the command's exit status, stdout and stderr, and the usage-error contract (exit 2, one line).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sparsevit::testing {

namespace fs = std::filesystem;

inline const std::string kBinary = SPARSEVIT_BINARY_DIR "/sparsevit";
inline const std::string kSourceDir = SPARSEVIT_SOURCE_DIR;

inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("sparsevit_cli_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name, const std::string& contents) const {
    const fs::path p = path_ / name;
    std::ofstream out(p, std::ios::binary);
    out << contents;
    return p.string();
  }

 private:
  fs::path path_;
};

struct Result {
  int exit_code = -1;     // -1 when the process did not exit normally
  int signal = 0;         // the signal that killed it, if any
  std::string out, err;
  std::string command;

  int stderr_lines() const {
    int lines = 0;
    for (char c : err) lines += c == '\n';
    if (!err.empty() && err.back() != '\n') ++lines;
    return lines;
  }
  std::string describe() const {
    return "command: " + command + "\nexit " + std::to_string(exit_code) + " signal " + std::to_string(signal) +
           "\n--- stdout ---\n" + out.substr(0, 2000) + "\n--- stderr ---\n" + err.substr(0, 2000);
  }
};

// Runs `sparsevit ARGS` (ARGS already shell-quoted where needed) in `cwd`, capturing stdout,
// stderr and the exit status.
inline Result run(const std::string& args, const std::string& cwd = kSourceDir) {
  static int counter = 0;
  const fs::path base = fs::temp_directory_path() /
                        ("sparsevit_cli_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string out_path = base.string() + ".out", err_path = base.string() + ".err";
  Result r;
  r.command = "cd " + quote(cwd) + " && " + quote(kBinary) + " " + args;
  const int status = std::system((r.command + " >" + quote(out_path) + " 2>" + quote(err_path) + " </dev/null").c_str());
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (status != -1 && WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::error_code ec;
  fs::remove(out_path, ec);
  fs::remove(err_path, ec);
  // A shell that reports a killed child as 128 + signal.
  if (r.exit_code > 128) r.signal = r.exit_code - 128;
  return r;
}

// The usage/config error contract: exit 2, nothing on stdout... one clear line on stderr.
inline void expect_usage_error(const Result& r, const std::string& must_mention = "") {
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_EQ(r.stderr_lines(), 1) << r.describe();
  if (!must_mention.empty()) {
    EXPECT_NE(r.err.find(must_mention), std::string::npos) << r.describe();
  }
}

}  // namespace sparsevit::testing
