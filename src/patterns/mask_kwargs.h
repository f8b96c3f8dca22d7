// MaskKwargs: a generator's keyword arguments as written in a config (`mask_kwargs:`),
// kept as text with the place they came from, converted on access with clear errors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sparsevit::patterns {

class MaskKwargs {
 public:
  struct Value {
    std::vector<std::string> items;  // one item for a scalar
    bool is_list = false;
    std::string where;  // "file:line" or "" when set from code
  };

  MaskKwargs& set_scalar(const std::string& name, const std::string& text, const std::string& where = "");
  MaskKwargs& set_list(const std::string& name, std::vector<std::string> items, const std::string& where = "");
  // Parses "name=value" (CLI overrides); a value "[1,2,3]" is a list.
  MaskKwargs& set_from_assignment(const std::string& assignment);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // Removes a kwarg (no-op when absent): budget matching drops the alternatives to its knob.
  MaskKwargs& erase(const std::string& name) {
    values_.erase(name);
    return *this;
  }
  bool is_list(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::map<std::string, Value>& values() const { return values_; }

  // Typed access; the bounds are inclusive and every violation throws UsageError naming the kwarg.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t min = INT64_MIN, int64_t max = INT64_MAX) const;
  std::optional<int64_t> get_optional_int(const std::string& name, int64_t min = INT64_MIN, int64_t max = INT64_MAX) const;
  double get_double(const std::string& name, double fallback, double min, double max) const;
  std::optional<double> get_optional_double(const std::string& name, double min, double max) const;
  bool get_bool(const std::string& name, bool fallback) const;
  std::string get_choice(const std::string& name, const std::string& fallback,
                         const std::vector<std::string>& choices) const;
  // A list of ints; a scalar reads as a one-element list. Empty when absent.
  std::vector<int64_t> get_int_list(const std::string& name, int64_t min = INT64_MIN, int64_t max = INT64_MAX) const;

  // "mask_kwargs.w_min (configs/x.yaml:5)": how errors name a kwarg.
  std::string describe(const std::string& name) const;
  // The config section errors name ("mask_kwargs", or "backend_kwargs" for a backend's own).
  MaskKwargs& set_section(std::string section);

 private:
  const Value* find(const std::string& name) const;
  std::string scalar(const std::string& name) const;

  std::map<std::string, Value> values_;
  std::string section_ = "mask_kwargs";
};

}  // namespace sparsevit::patterns
