#include "train/metrics_log.h"

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "util/errors.h"

namespace sparsevit::train {

MetricsLog::MetricsLog(std::string path) : path_(std::move(path)) {
  out_.open(path_, std::ios::out | std::ios::app);
  if (!out_) throw RuntimeError("cannot open metrics log " + path_ + " for appending: " + std::strerror(errno));
}

void MetricsLog::append(const nlohmann::json& record) {
  if (!record.is_object()) throw UsageError("metrics log records must be JSON objects, got " + record.dump());
  // dump() with replace: a stray invalid UTF-8 byte in a string never aborts training.
  out_ << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
  if (!out_) throw RuntimeError("cannot write to metrics log " + path_ + ": " + std::strerror(errno));
}

}  // namespace sparsevit::train
