#pragma once
// Named non-tensor arguments of an op (dims, keepdim, eps, ignore_index, ...), so the op
// registry can describe and call every op the same way.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace fathom {

using AttrValue = std::variant<bool, int64_t, double, std::vector<int64_t>>;

class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<const std::string, AttrValue>> values) : values_(values) {}

  Attributes& set(const std::string& name, AttrValue value) {
    values_[name] = std::move(value);
    return *this;
  }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  // Typed reads; a missing attribute or a wrong type throws naming the attribute. An int
  // attribute also reads as double.
  bool get_bool(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  // Reads with a default for absent attributes.
  bool get_bool(const std::string& name, bool fallback) const { return has(name) ? get_bool(name) : fallback; }
  int64_t get_int(const std::string& name, int64_t fallback) const { return has(name) ? get_int(name) : fallback; }
  double get_double(const std::string& name, double fallback) const {
    return has(name) ? get_double(name) : fallback;
  }
  std::string str() const;  // "{dim: [1], keepdim: true}"

 private:
  const AttrValue& at(const std::string& name) const;
  std::map<std::string, AttrValue> values_;
};

}  // namespace fathom
