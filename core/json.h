#pragma once
// A small, strict JSON reader (RFC 8259) for the few places Fathom reads JSON it did not write
// itself: safetensors headers and test reference data.
//
// Strict on purpose: a safetensors header comes from an untrusted file, so anything the RFC
// does not allow (comments, trailing commas, leading zeros, raw control characters, invalid
// UTF-8, lone surrogates) is an error, and so is a key repeated within one object — two
// entries for one tensor name would make "which one wins" a silent guess. Nesting is limited
// so a hostile file cannot exhaust the stack. Errors name the source and the byte offset.
//
// Numbers keep their literal text: integers are read exactly as int64 (shapes and offsets),
// everything else as the nearest double (std::from_chars, locale-independent).
// (The engine's config reader uses yaml-cpp; this reader exists because a header parser must
// reject duplicates and report byte offsets, which yaml-cpp does not.)

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace fathom {

enum class JsonKind { Null, Bool, Number, String, Array, Object };
const char* json_kind_name(JsonKind kind);  // "null", "a boolean", "a number", ...

class JsonValue {
 public:
  using Members = std::vector<std::pair<std::string, JsonValue>>;

  JsonValue() = default;  // null
  JsonKind kind() const { return kind_; }
  bool is_null() const { return kind_ == JsonKind::Null; }
  bool is_bool() const { return kind_ == JsonKind::Bool; }
  bool is_number() const { return kind_ == JsonKind::Number; }
  bool is_string() const { return kind_ == JsonKind::String; }
  bool is_array() const { return kind_ == JsonKind::Array; }
  bool is_object() const { return kind_ == JsonKind::Object; }
  // True for a number literal without fraction or exponent that fits in int64.
  bool is_integer() const;

  // Typed access; each throws naming the expected and the actual kind.
  bool as_bool() const;
  double as_double() const;
  int64_t as_int64() const;  // throws unless is_integer()
  const std::string& as_string() const;
  const std::vector<JsonValue>& as_array() const;
  const Members& as_object() const;  // in document order

  // Object lookup: nullptr when absent (find) or a throw naming the key (at).
  const JsonValue* find(std::string_view key) const;
  const JsonValue& at(std::string_view key) const;
  const std::string& number_text() const { return text_; }
  // Byte offset of the value's first character in the parsed text (plus the base offset
  // passed to parse), for error messages.
  size_t offset() const { return offset_; }

 private:
  friend class JsonParser;
  JsonKind kind_ = JsonKind::Null;
  bool bool_ = false;
  std::string text_;  // string contents, or the number's literal text
  std::vector<JsonValue> array_;
  Members object_;
  size_t offset_ = 0;
};

// What parse_json throws for text that is not JSON: the message names the source and byte;
// offset() and reason() let a caller (the config reader) report a line and column instead.
class JsonSyntaxError : public Error {
 public:
  JsonSyntaxError(const char* file, int line, const std::string& source, size_t offset, std::string reason);
  size_t offset() const { return offset_; }
  const std::string& reason() const { return reason_; }

 private:
  size_t offset_;
  std::string reason_;
};

// Parses one JSON document (surrounding whitespace allowed). `source` names the text in error
// messages ("safetensors header of 'model.safetensors'"); `base_offset` is added to reported
// byte offsets (e.g. 8 when the text starts 8 bytes into a file).
JsonValue parse_json(std::string_view text, const std::string& source = "JSON text", size_t base_offset = 0);

// Appends `text` as a JSON string literal (quoted, escaped) to `out`.
void append_json_string(std::string& out, std::string_view text);

}  // namespace fathom
