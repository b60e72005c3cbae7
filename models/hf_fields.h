#pragma once
// Typed reads of a Hugging Face config.json's fields: a null field counts as absent; a field of
// the wrong kind is an error naming it and the kind it has. And the one field written in more
// than one shape: special token ids.

#include <cstdint>
#include <string>

#include <vector>

#include "core/dtype.h"
#include "core/json.h"
#include "core/json_writer.h"

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
  // bos/eos ids: an integer, a list of them, or null.
  std::vector<int64_t> token_ids(const std::string& key) const {
    const JsonValue* value = find(key);
    if (!value) return {};
    if (value->is_integer()) return {value->as_int64()};
    FATHOM_CHECK(value->is_array(), source_, ": \"", key, "\" must be a token id or a list of them");
    std::vector<int64_t> ids;
    for (const JsonValue& id : value->as_array()) {
      FATHOM_CHECK(id.is_integer(), source_, ": \"", key, "\" must hold integer token ids");
      ids.push_back(id.as_int64());
    }
    return ids;
  }

 private:
  const JsonValue& json_;
  std::string source_;
};

// config.json's torch_dtype for a weight dtype.
inline const char* dtype_hf_name(DType dtype) {
  switch (dtype) {
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    case DType::F64: return "float64";
    default: return "float32";
  }
}

// Token ids as transformers writes them: null, one integer, or a list.
inline void write_token_ids(JsonWriter& w, const char* key, const std::vector<int64_t>& ids) {
  if (ids.empty()) return void(w.key(key).null());
  if (ids.size() == 1) return void(w.member(key, static_cast<long long>(ids[0])));
  w.key(key).begin_array(JsonWriter::Layout::Inline);
  for (int64_t id : ids) w.value(static_cast<long long>(id));
  w.end_array();
}

}  // namespace fathom::models
