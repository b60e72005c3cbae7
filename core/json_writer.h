#pragma once
// JsonWriter: the one way Fathom writes JSON — configs (Config::to_json), checkpoint indexes,
// safetensors headers. Strings are quoted and escaped, doubles written in their shortest form
// that reads back exactly (with ".0" when integral, as Python's json.dumps, so a float stays a
// float), and separators placed by the writer, so no caller concatenates JSON by hand.
//
//   JsonWriter w;                        // pretty: one member per line, 2-space indent
//   w.begin_object();
//   w.member("tag", "global_step10").member("world_size", 4);
//   w.key("shards").begin_array();
//   w.begin_object(JsonWriter::Layout::Inline).member("rank", 0).end_object();   // on one line
//   w.end_array().end_object();
//   std::string text = w.str();
//
// Layouts: Pretty (members on their own lines), Inline (one line, ", " and ": "), Compact (one
// line, no spaces: safetensors headers). A container inside an Inline or Compact one stays on
// its line.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

class JsonWriter {
 public:
  enum class Layout { Pretty, Inline, Compact };
  // The layout of the outermost containers (nested ones inherit, or choose Inline/Compact).
  explicit JsonWriter(Layout layout = Layout::Pretty) : layout_(layout) {}

  JsonWriter& begin_object(Layout layout = Layout::Pretty);
  JsonWriter& end_object();
  JsonWriter& begin_array(Layout layout = Layout::Pretty);
  JsonWriter& end_array();
  // The next value's key (inside an object).
  JsonWriter& key(std::string_view key);

  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(bool flag);
  JsonWriter& value(int value) { return value_int(value); }
  JsonWriter& value(long value) { return value_int(value); }
  JsonWriter& value(long long value) { return value_int(value); }
  JsonWriter& value(double value);
  JsonWriter& null();
  // Already-formed JSON text (e.g. a document written by another JsonWriter).
  JsonWriter& raw(std::string_view json);

  template <typename T>
  JsonWriter& member(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  // The text; every container must be closed.
  const std::string& str() const;

 private:
  struct Open {
    bool object;
    Layout layout;
    bool empty = true;
  };
  JsonWriter& value_int(long long value);
  JsonWriter& begin(bool object, Layout layout);
  JsonWriter& end(bool object);
  void before_value();  // the separator and indentation a new element needs
  Layout current_layout() const;

  Layout layout_;
  std::string out_;
  std::vector<Open> open_;
  bool after_key_ = false;
};

// The shortest text that reads back as exactly `value`, ".0" added when it is integral.
std::string json_number(double value);

}  // namespace fathom
