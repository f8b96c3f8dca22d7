#include "runtime/host_info.h"

#include <ctime>
#include <fstream>
#include <thread>

namespace sparsevit::runtime {

std::string cpu_model_name(std::istream& cpuinfo) {
  const std::string key = "model name";
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto begin = line.find_first_not_of(" \t", colon + 1);
    const auto end = line.find_last_not_of(" \t\r");
    if (begin == std::string::npos || end < begin) continue;
    return line.substr(begin, end - begin + 1);
  }
  return "unknown";
}

HostInfo describe_host() {
  HostInfo h;
  std::ifstream cpuinfo("/proc/cpuinfo");
  h.cpu = cpu_model_name(cpuinfo);
  h.cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  return h;
}

std::string utc_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), format, &utc);
  return text;
}

}  // namespace sparsevit::runtime
