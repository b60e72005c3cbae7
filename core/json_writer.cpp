#include "core/json_writer.h"

#include <charconv>
#include <cmath>

#include "core/error.h"
#include "core/json.h"

namespace fathom {

std::string json_number(double value) {
  FATHOM_CHECK(std::isfinite(value), "JSON has no representation for ", value, " (only finite numbers)");
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round-trip form
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";  // stays a float when read back
  return text;
}

JsonWriter::Layout JsonWriter::current_layout() const { return open_.empty() ? layout_ : open_.back().layout; }

void JsonWriter::before_value() {
  if (after_key_) {  // the key wrote the separator already
    after_key_ = false;
    return;
  }
  if (open_.empty()) {
    FATHOM_CHECK(out_.empty(), "JsonWriter: a second top-level value");
    return;
  }
  Open& open = open_.back();
  FATHOM_CHECK(!open.object, "JsonWriter: a value inside an object needs a key first");
  if (!open.empty) out_ += open.layout == Layout::Compact ? "," : open.layout == Layout::Inline ? ", " : ",";
  if (open.layout == Layout::Pretty) out_ += "\n" + std::string(2 * open_.size(), ' ');
  open.empty = false;
}

JsonWriter& JsonWriter::key(std::string_view key) {
  FATHOM_CHECK(!open_.empty() && open_.back().object && !after_key_, "JsonWriter: a key outside an object");
  Open& open = open_.back();
  if (!open.empty) out_ += open.layout == Layout::Inline ? ", " : ",";
  if (open.layout == Layout::Pretty) out_ += "\n" + std::string(2 * open_.size(), ' ');
  open.empty = false;
  append_json_string(out_, key);
  out_ += open.layout == Layout::Compact ? ":" : ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::begin(bool object, Layout layout) {
  before_value();
  // Inside a one-line container everything stays on that line.
  const Layout outer = current_layout();
  if (!open_.empty() && outer != Layout::Pretty) layout = outer;
  if (open_.empty() && layout == Layout::Pretty) layout = layout_;
  out_ += object ? "{" : "[";
  open_.push_back({object, layout});
  return *this;
}

JsonWriter& JsonWriter::end(bool object) {
  FATHOM_CHECK(!open_.empty() && open_.back().object == object && !after_key_, "JsonWriter: ",
               object ? "end_object" : "end_array", " does not close the innermost container");
  const Open open = open_.back();
  open_.pop_back();
  if (open.layout == Layout::Pretty && !open.empty) out_ += "\n" + std::string(2 * open_.size(), ' ');
  out_ += object ? "}" : "]";
  return *this;
}

JsonWriter& JsonWriter::begin_object(Layout layout) { return begin(true, layout); }
JsonWriter& JsonWriter::end_object() { return end(true); }
JsonWriter& JsonWriter::begin_array(Layout layout) { return begin(false, layout); }
JsonWriter& JsonWriter::end_array() { return end(false); }

JsonWriter& JsonWriter::value(std::string_view text) {
  before_value();
  append_json_string(out_, text);
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) { return raw(flag ? "true" : "false"); }
JsonWriter& JsonWriter::value_int(long long value) { return raw(std::to_string(value)); }
JsonWriter& JsonWriter::value(double value) { return raw(json_number(value)); }
JsonWriter& JsonWriter::null() { return raw("null"); }

JsonWriter& JsonWriter::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

const std::string& JsonWriter::str() const {
  FATHOM_CHECK(open_.empty() && !after_key_, "JsonWriter: ", open_.size(), " container(s) still open");
  return out_;
}

}  // namespace fathom
