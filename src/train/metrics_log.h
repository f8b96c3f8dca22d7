// Append-only metrics.jsonl: one JSON object per line, flushed line by line so a crash or a
// `tail -f` never sees half a record.
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace sparsevit::train {

class MetricsLog {
 public:
  // Opens (creating the file, not its folder) in append mode; throws RuntimeError when it can't.
  explicit MetricsLog(std::string path);

  // Writes `record` (must be a JSON object; throws UsageError otherwise) as one line and flushes.
  void append(const nlohmann::json& record);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace sparsevit::train
