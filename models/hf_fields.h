#pragma once
// Typed reads of a Hugging Face config.json's fields: a null field counts as absent; a field of
// the wrong kind is an error naming it and the kind it has.

#include <cstdint>
#include <string>

#include "core/json.h"

namespace fathom::models {

class ConfigFields {
 public:
  ConfigFields(const JsonValue& json, std::string source) : json_(json), source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  const JsonValue* find(const std::string& key) const {
    const JsonValue* value = json_.find(key);
    return value && !value->is_null() ? value : nullptr;
  }
  int64_t integer(const std::string& key, int64_t fallback, bool required = false) const {
    const JsonValue* value = find(key);
    FATHOM_CHECK(value || !required, source_, ": the field \"", key, "\" is required");
    if (!value) return fallback;
    FATHOM_CHECK(value->is_integer(), source_, ": \"", key, "\" must be an integer, got ", json_kind_name(value->kind()));
    return value->as_int64();
  }
  double number(const std::string& key, double fallback) const {
    const JsonValue* value = find(key);
    if (!value) return fallback;
    FATHOM_CHECK(value->is_number(), source_, ": \"", key, "\" must be a number, got ", json_kind_name(value->kind()));
    return value->as_double();
  }
  bool flag(const std::string& key, bool fallback) const {
    const JsonValue* value = find(key);
    if (!value) return fallback;
    FATHOM_CHECK(value->is_bool(), source_, ": \"", key, "\" must be true or false, got ",
                 json_kind_name(value->kind()));
    return value->as_bool();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    const JsonValue* value = find(key);
    if (!value) return fallback;
    FATHOM_CHECK(value->is_string(), source_, ": \"", key, "\" must be a string, got ", json_kind_name(value->kind()));
    return value->as_string();
  }

 private:
  const JsonValue& json_;
  std::string source_;
};

}  // namespace fathom::models
