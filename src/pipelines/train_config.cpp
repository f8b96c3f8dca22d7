#include "pipelines/train_config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <type_traits>

#include "distributed/process_group.h"
#include "util/errors.h"

namespace sparsevit::pipelines {

namespace field {
FieldInfo any(const char* name, const char* help, FieldGroup group) {
  FieldInfo f;
  f.name = name;
  f.help = help;
  f.group = group;
  return f;
}
FieldInfo positive(const char* name, const char* help, FieldGroup group) {
  FieldInfo f = any(name, help, group);
  f.min = 0;
  f.min_inclusive = false;
  return f;
}
FieldInfo non_negative(const char* name, const char* help, FieldGroup group) {
  FieldInfo f = any(name, help, group);
  f.min = 0;
  return f;
}
FieldInfo at_least_one(const char* name, const char* help, FieldGroup group) {
  FieldInfo f = any(name, help, group);
  f.min = 1;
  return f;
}
FieldInfo unit_interval(const char* name, const char* help, bool max_inclusive) {
  FieldInfo f = any(name, help);
  f.min = 0;
  f.max = 1;
  f.max_inclusive = max_inclusive;
  return f;
}
FieldInfo one_of(const char* name, const char* help, std::vector<std::string> choices, FieldGroup group) {
  FieldInfo f = any(name, help, group);
  f.choices = std::move(choices);
  return f;
}
}  // namespace field

namespace {

std::string number(double v) { return fmt::format("{}", v); }

// "--smoothing must be in [0, 1)", "--batch_size must be > 0", "--epochs must be >= 0".
void check_range(const FieldInfo& f, double v) {
  const bool has_min = f.min > -std::numeric_limits<double>::infinity();
  const bool has_max = f.max < std::numeric_limits<double>::infinity();
  const bool low_ok = !has_min || (f.min_inclusive ? v >= f.min : v > f.min);
  const bool high_ok = !has_max || (f.max_inclusive ? v <= f.max : v < f.max);
  if (low_ok && high_ok && v == v) return;
  const std::string flag = std::string("--") + f.name;
  if (has_min && has_max)
    throw UsageError(flag + " must be in " + (f.min_inclusive ? "[" : "(") + number(f.min) + ", " + number(f.max) +
                     (f.max_inclusive ? "]" : ")"));
  if (has_min) throw UsageError(flag + " must be " + (f.min_inclusive ? ">= " : "> ") + number(f.min));
  throw UsageError(flag + " must be " + (f.max_inclusive ? "<= " : "< ") + number(f.max));
}

// "--train_crop must be pad, rrc or none, got 'x'".
void check_choice(const FieldInfo& f, const std::string& v) {
  if (f.choices.empty()) return;
  for (const auto& choice : f.choices)
    if (v == choice) return;
  std::string list;
  for (std::size_t i = 0; i < f.choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == f.choices.size() ? " or " : ", ") + f.choices[i];
  throw UsageError(std::string("--") + f.name + " must be " + list + ", got '" + v + "'");
}

}  // namespace

nlohmann::json config_to_json(const TrainConfig& c, unsigned command) {
  nlohmann::json j = nlohmann::json::object();
  for_each_field(c, [&](const auto& value, const FieldInfo& f) {
    if (f.commands & command) j[f.name] = value;
  });
  return j;
}

TrainConfig resolve(TrainConfig c, unsigned command) {
  for_each_field(c, [&](const auto& value, const FieldInfo& f) {
    if (!(f.commands & command)) return;
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, std::string>) {
      check_choice(f, value);
    } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      check_range(f, static_cast<double>(value));
    }
  });
  if (c.eval && c.resume.empty()) throw UsageError("--eval needs --resume CHECKPOINT");
  if (!dist::backend_available(c.dist_backend))
    throw UsageError("--dist_backend " + c.dist_backend + ": this LibTorch build has no NCCL (it is a CPU build); use gloo");
  if (c.device != "cpu" && c.device.rfind("cuda", 0) != 0)
    throw UsageError("--device must be cpu or cuda[:N], got '" + c.device + "'");
  if (c.aa == "none") c.aa.clear();
  if (c.log_dir.empty()) c.log_dir = c.output_dir;
  return c;
}

}  // namespace sparsevit::pipelines
