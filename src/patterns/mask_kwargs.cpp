#include "patterns/mask_kwargs.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "util/did_you_mean.h"
#include "util/errors.h"
#include "util/text.h"

namespace sparsevit::patterns {
namespace {

std::optional<int64_t> parse_int(const std::string& text) {
  const std::string t = trim(text);
  int64_t v = 0;
  const char* begin = t.data() + (!t.empty() && t[0] == '+' ? 1 : 0);
  const auto [ptr, ec] = std::from_chars(begin, t.data() + t.size(), v);
  if (ec != std::errc() || ptr != t.data() + t.size() || t.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);  // the process keeps the "C" numeric locale
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

MaskKwargs& MaskKwargs::set_scalar(const std::string& name, const std::string& text, const std::string& where) {
  values_[name] = Value{{text}, false, where};
  return *this;
}

MaskKwargs& MaskKwargs::set_list(const std::string& name, std::vector<std::string> items, const std::string& where) {
  values_[name] = Value{std::move(items), true, where};
  return *this;
}

MaskKwargs& MaskKwargs::set_from_assignment(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError("expected NAME=VALUE for a mask kwarg, got '" + assignment + "'");
  const std::string name = trim(assignment.substr(0, eq));
  const std::string value = trim(assignment.substr(eq + 1));
  if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
    std::vector<std::string> items;
    std::stringstream in(value.substr(1, value.size() - 2));
    for (std::string item; std::getline(in, item, ',');)
      if (!trim(item).empty()) items.push_back(trim(item));
    return set_list(name, std::move(items), "command line");
  }
  return set_scalar(name, value, "command line");
}

bool MaskKwargs::is_list(const std::string& name) const {
  const Value* v = find(name);
  return v && v->is_list;
}

std::vector<std::string> MaskKwargs::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values_) out.push_back(k);
  return out;
}

const MaskKwargs::Value* MaskKwargs::find(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

std::string MaskKwargs::describe(const std::string& name) const {
  const Value* v = find(name);
  std::string d = section_ + "." + name;
  if (v && !v->where.empty()) d += " (" + v->where + ")";
  return d;
}

MaskKwargs& MaskKwargs::set_section(std::string section) {
  section_ = std::move(section);
  return *this;
}

std::string MaskKwargs::scalar(const std::string& name) const {
  const Value* v = find(name);
  if (v->is_list) throw UsageError(describe(name) + ": expected a single value, got a list");
  return trim(v->items.at(0));
}

int64_t MaskKwargs::get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  return get_optional_int(name, min, max).value_or(fallback);
}

std::optional<int64_t> MaskKwargs::get_optional_int(const std::string& name, int64_t min, int64_t max) const {
  if (!has(name)) return std::nullopt;
  const std::string text = scalar(name);
  const auto v = parse_int(text);
  if (!v) throw UsageError(describe(name) + ": expected an integer, got '" + text + "'");
  if (*v < min || *v > max) {
    std::string range = min == INT64_MIN ? "<= " + std::to_string(max)
                        : max == INT64_MAX ? ">= " + std::to_string(min)
                                           : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    throw UsageError(describe(name) + ": must be " + range + ", got " + std::to_string(*v));
  }
  return v;
}

double MaskKwargs::get_double(const std::string& name, double fallback, double min, double max) const {
  return get_optional_double(name, min, max).value_or(fallback);
}

std::optional<double> MaskKwargs::get_optional_double(const std::string& name, double min, double max) const {
  if (!has(name)) return std::nullopt;
  const std::string text = scalar(name);
  const auto v = parse_double(text);
  if (!v) throw UsageError(describe(name) + ": expected a number, got '" + text + "'");
  if (*v < min || *v > max) {
    std::ostringstream msg;
    msg << describe(name) << ": must be in [" << min << ", " << max << "], got " << *v;
    throw UsageError(msg.str());
  }
  return v;
}

bool MaskKwargs::get_bool(const std::string& name, bool fallback) const {
  if (!has(name)) return fallback;
  std::string t = scalar(name);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  throw UsageError(describe(name) + ": expected true or false, got '" + t + "'");
}

std::string MaskKwargs::get_choice(const std::string& name, const std::string& fallback,
                                   const std::vector<std::string>& choices) const {
  if (!has(name)) return fallback;
  const std::string t = scalar(name);
  if (std::find(choices.begin(), choices.end(), t) == choices.end())
    throw UsageError(describe(name) + ": " + unknown_name_message("value", t, choices));
  return t;
}

std::vector<int64_t> MaskKwargs::get_int_list(const std::string& name, int64_t min, int64_t max) const {
  const Value* v = find(name);
  if (!v) return {};
  std::vector<int64_t> out;
  for (const auto& item : v->items) {
    const auto x = parse_int(item);
    if (!x) throw UsageError(describe(name) + ": expected integers, got '" + trim(item) + "'");
    if (*x < min || *x > max)
      throw UsageError(describe(name) + ": every value must be in [" + std::to_string(min) + ", " +
                       std::to_string(max) + "], got " + std::to_string(*x));
    out.push_back(*x);
  }
  return out;
}

}  // namespace sparsevit::patterns
