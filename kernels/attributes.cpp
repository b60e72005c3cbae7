#include "kernels/attributes.h"

#include <sstream>

#include "core/error.h"
#include "core/shape.h"

namespace fathom {

const AttrValue& Attributes::at(const std::string& name) const {
  auto it = values_.find(name);
  FATHOM_CHECK(it != values_.end(), "missing op attribute \"", name, "\" (have ", str(), ")");
  return it->second;
}

bool Attributes::get_bool(const std::string& name) const {
  const AttrValue& v = at(name);
  FATHOM_CHECK(std::holds_alternative<bool>(v), "op attribute \"", name, "\" is not a bool");
  return std::get<bool>(v);
}

int64_t Attributes::get_int(const std::string& name) const {
  const AttrValue& v = at(name);
  FATHOM_CHECK(std::holds_alternative<int64_t>(v), "op attribute \"", name, "\" is not an integer");
  return std::get<int64_t>(v);
}

double Attributes::get_double(const std::string& name) const {
  const AttrValue& v = at(name);
  if (std::holds_alternative<int64_t>(v)) return static_cast<double>(std::get<int64_t>(v));
  FATHOM_CHECK(std::holds_alternative<double>(v), "op attribute \"", name, "\" is not a number");
  return std::get<double>(v);
}

const std::vector<int64_t>& Attributes::get_ints(const std::string& name) const {
  const AttrValue& v = at(name);
  FATHOM_CHECK(std::holds_alternative<std::vector<int64_t>>(v), "op attribute \"", name, "\" is not an integer list");
  return std::get<std::vector<int64_t>>(v);
}

std::string Attributes::str() const {
  std::ostringstream out;
  out << '{';
  bool first = true;
  for (const auto& [name, value] : values_) {
    out << (first ? "" : ", ") << name << ": ";
    first = false;
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, bool>) out << (v ? "true" : "false");
          else if constexpr (std::is_same_v<V, std::vector<int64_t>>) out << shape_str(v);
          else out << v;
        },
        value);
  }
  out << '}';
  return out.str();
}

}  // namespace fathom
