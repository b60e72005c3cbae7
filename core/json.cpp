#include "core/json.h"

#include <charconv>
#include <cstdio>
#include <unordered_set>

#include "core/error.h"

namespace fathom {

const char* json_kind_name(JsonKind kind) {
  switch (kind) {
    case JsonKind::Null: return "null";
    case JsonKind::Bool: return "a boolean";
    case JsonKind::Number: return "a number";
    case JsonKind::String: return "a string";
    case JsonKind::Array: return "an array";
    case JsonKind::Object: return "an object";
  }
  return "an invalid value";
}

namespace {

// Deep enough for any real header or config; shallow enough that recursion cannot overflow.
constexpr int kMaxDepth = 256;

bool parse_int64(const std::string& text, int64_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

void expect_kind(const JsonValue& value, JsonKind kind) {
  FATHOM_CHECK(value.kind() == kind, "JSON value at byte ", value.offset(), " is ", json_kind_name(value.kind()),
               ", expected ", json_kind_name(kind));
}

}  // namespace

bool JsonValue::is_integer() const {
  if (kind_ != JsonKind::Number || text_.find_first_of(".eE") != std::string::npos) return false;
  int64_t unused = 0;
  return parse_int64(text_, unused);
}

bool JsonValue::as_bool() const {
  expect_kind(*this, JsonKind::Bool);
  return bool_;
}

double JsonValue::as_double() const {
  expect_kind(*this, JsonKind::Number);
  double out = 0;
  const char* end = text_.data() + text_.size();
  auto [ptr, ec] = std::from_chars(text_.data(), end, out);
  // Out of double's range (1e999) is the only way a grammatical number can fail here.
  FATHOM_CHECK(ec == std::errc() && ptr == end, "JSON number ", text_, " at byte ", offset_,
               " is out of the range of a double");
  return out;
}

int64_t JsonValue::as_int64() const {
  expect_kind(*this, JsonKind::Number);
  int64_t out = 0;
  FATHOM_CHECK(text_.find_first_of(".eE") == std::string::npos && parse_int64(text_, out), "JSON number ", text_,
               " at byte ", offset_, " is not an integer in the int64 range");
  return out;
}

const std::string& JsonValue::as_string() const {
  expect_kind(*this, JsonKind::String);
  return text_;
}

const std::vector<JsonValue>& JsonValue::as_array() const {
  expect_kind(*this, JsonKind::Array);
  return array_;
}

const JsonValue::Members& JsonValue::as_object() const {
  expect_kind(*this, JsonKind::Object);
  return object_;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [name, value] : as_object())
    if (name == key) return &value;
  return nullptr;
}

const JsonValue& JsonValue::at(std::string_view key) const {
  const JsonValue* value = find(key);
  FATHOM_CHECK(value != nullptr, "JSON object at byte ", offset_, " has no key \"", key, "\"");
  return *value;
}

JsonSyntaxError::JsonSyntaxError(const char* file, int line, const std::string& source, size_t offset,
                                 std::string reason)
    : Error(file, line, detail::concat(source, ": invalid JSON at byte ", offset, ": ", reason)),
      offset_(offset),
      reason_(std::move(reason)) {}

// Recursive descent over the text; every read is bounds-checked against `text_.size()`.
class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& source, size_t base)
      : text_(text), source_(source), base_(base) {}

  JsonValue parse_document() {
    skip_whitespace();
    JsonValue value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected ", describe_here(), " after the end of the JSON value");
    return value;
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    throw JsonSyntaxError(__FILE__, __LINE__, source_, base_ + pos_, detail::concat(args...));
  }

  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of text";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7f) return std::string("character '") + static_cast<char>(c) + "'";
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "byte 0x%02x", c);
    return buffer;
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  void expect_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("expected a JSON value, found ", describe_here());
    pos_ += word.size();
  }

  JsonValue parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than ", kMaxDepth, " levels");
    JsonValue value;
    value.offset_ = base_ + pos_;
    switch (peek()) {
      case '{': parse_object(value, depth); break;
      case '[': parse_array(value, depth); break;
      case '"':
        value.kind_ = JsonKind::String;
        value.text_ = parse_string();
        break;
      case 't':
        expect_literal("true");
        value.kind_ = JsonKind::Bool;
        value.bool_ = true;
        break;
      case 'f':
        expect_literal("false");
        value.kind_ = JsonKind::Bool;
        break;
      case 'n': expect_literal("null"); break;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
          value.kind_ = JsonKind::Number;
          value.text_ = parse_number();
        } else {
          fail("expected a JSON value, found ", describe_here());
        }
    }
    return value;
  }

  void parse_object(JsonValue& value, int depth) {
    value.kind_ = JsonKind::Object;
    ++pos_;  // '{'
    skip_whitespace();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    std::unordered_set<std::string> seen;
    while (true) {
      skip_whitespace();
      if (peek() != '"') fail("expected a string key, found ", describe_here());
      const size_t key_pos = pos_;
      std::string key = parse_string();
      // A set, not a scan of the members: a header may hold many thousands of tensors.
      if (!seen.insert(key).second) {
        pos_ = key_pos;
        fail("duplicate key \"", key, "\" in one object; each key may appear once");
      }
      skip_whitespace();
      if (peek() != ':') fail("expected ':' after key \"", key, "\", found ", describe_here());
      ++pos_;
      skip_whitespace();
      JsonValue member = parse_value(depth + 1);
      value.object_.emplace_back(std::move(key), std::move(member));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return;
      }
      fail("expected ',' or '}' after an object member, found ", describe_here());
    }
  }

  void parse_array(JsonValue& value, int depth) {
    value.kind_ = JsonKind::Array;
    ++pos_;  // '['
    skip_whitespace();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skip_whitespace();
      value.array_.push_back(parse_value(depth + 1));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return;
      }
      fail("expected ',' or ']' after an array element, found ", describe_here());
    }
  }

  std::string parse_number() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t first = pos_;
      while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - first;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') fail("number with a leading zero");
    } else if (digits() == 0) {
      fail("expected a digit, found ", describe_here());
    }
    if (peek() == '.') {
      ++pos_;
      if (digits() == 0) fail("expected a digit after '.', found ", describe_here());
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) fail("expected a digit in the exponent, found ", describe_here());
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  unsigned parse_hex4() {
    unsigned code = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      const char c = peek();
      unsigned digit;
      if (c >= '0' && c <= '9') digit = c - '0';
      else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      else fail("expected a hex digit in a \\u escape, found ", describe_here());
      code = code * 16 + digit;
    }
    return code;
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  // Copies one raw UTF-8 sequence starting at pos_, rejecting overlongs, surrogates and
  // truncation (RFC 3629), so names read from a file are always valid UTF-8.
  void copy_utf8_sequence(std::string& out) {
    const unsigned char lead = static_cast<unsigned char>(text_[pos_]);
    int length;
    uint32_t code;
    if (lead >= 0xc2 && lead <= 0xdf) length = 2, code = lead & 0x1f;
    else if (lead >= 0xe0 && lead <= 0xef) length = 3, code = lead & 0x0f;
    else if (lead >= 0xf0 && lead <= 0xf4) length = 4, code = lead & 0x07;
    else fail("invalid UTF-8 lead ", describe_here(), " in a string");
    if (pos_ + length > text_.size()) fail("truncated UTF-8 sequence in a string");
    for (int i = 1; i < length; ++i) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_ + i]);
      if ((c & 0xc0) != 0x80) {
        pos_ += i;
        fail("invalid UTF-8 continuation ", describe_here(), " in a string");
      }
      code = (code << 6) | (c & 0x3f);
    }
    const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
    if (overlong || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff)
      fail("invalid UTF-8 sequence (overlong, surrogate or beyond U+10FFFF) in a string");
    out.append(text_.substr(pos_, length));
    pos_ += length;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("raw control ", describe_here(), " in a string; write it as an escape (\\n, \\u0001)");
      if (c >= 0x80) {
        copy_utf8_sequence(out);
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;  // backslash
      const char escape = peek();
      ++pos_;
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t code = parse_hex4();
          if (code >= 0xdc00 && code <= 0xdfff) fail("lone low surrogate \\u", std::hex, code, " in a string");
          if (code >= 0xd800 && code <= 0xdbff) {
            if (text_.substr(pos_, 2) != "\\u") fail("high surrogate not followed by a low surrogate escape");
            pos_ += 2;
            const uint32_t low = parse_hex4();
            if (low < 0xdc00 || low > 0xdfff) fail("high surrogate not followed by a low surrogate escape");
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, code);
          break;
        }
        default:
          --pos_;
          fail("invalid escape: backslash followed by ", describe_here(), " in a string");
      }
    }
  }

  std::string_view text_;
  const std::string& source_;
  size_t base_;
  size_t pos_ = 0;
};

JsonValue parse_json(std::string_view text, const std::string& source, size_t base_offset) {
  return JsonParser(text, source, base_offset).parse_document();
}

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += ch;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

}  // namespace fathom
