#pragma once
// One declaration per config key: each section has one table of its keys, in the order
// Config::to_json writes them, and reading, the unknown-key check (with its did-you-mean) and the
// writer all go through it. So adding a key is one line, and the config written back can neither
// miss a key that is read nor drift from how it is read. A key whose value is code's (a list, an
// optional, a nested object, a deprecated spelling) is in the table too, read by hand and written
// by its function; refusals and rules across keys stay code beside the table.
//   {"loss_scale_window", &Fp16Config::loss_scale_window, {1}},  // an integer >= 1
//   {"device", &OffloadParamConfig::device, {"none", "cpu", "nvme"}},
//   {"thread_count"},  // read by hand (DeepSpeed's older name of intra_op_parallelism), not written

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/json_writer.h"
#include "engine/config/section.h"

namespace fathom {

// A number's range; an integer's infinite bounds are int64's.
struct Bounds {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
};

// A string key whose "" means "not given": written as null.
constexpr bool kNullIfEmpty = true;

template <typename Section>
struct Field {
  // Writes a key read by hand: w.key(key) and its value, or nothing while it is unset.
  using Write = void (*)(JsonWriter& w, const char* key, const Section& c);

  // A key read by hand, written back by `write` (nullptr: not written back).
  Field(const char* key, Write write = nullptr) : key(key), write(write) {}
  // A member: a bool, an integer or a number within `bounds`, or any string.
  template <typename T>
  Field(const char* key, T Section::*member, Bounds bounds = {})
      : key(key),
        read([member, bounds](const ConfigSection& s, const std::string& spelled, Section& c) {
          const auto to_int64 = [](double bound) {
            return std::isinf(bound) ? (bound < 0 ? INT64_MIN : INT64_MAX) : static_cast<int64_t>(bound);
          };
          if constexpr (std::is_same_v<T, bool>) c.*member = s.boolean(spelled, c.*member);
          else if constexpr (std::is_same_v<T, int64_t>)
            c.*member = s.integer(spelled, c.*member, to_int64(bounds.min), to_int64(bounds.max));
          else if constexpr (std::is_same_v<T, double>) c.*member = s.number(spelled, c.*member, bounds.min, bounds.max);
          else c.*member = s.string(spelled, c.*member);
        }),
        write([member](JsonWriter& w, const char* key, const Section& c) { w.member(key, c.*member); }) {}
  // A string member from `choices` (ConfigSection::choice; none: any string).
  Field(const char* key, std::string Section::*member, std::vector<std::string> choices, bool null_if_empty = false)
      : Field(key, member) {
    if (!choices.empty())
      read = [member, choices](const ConfigSection& s, const std::string& spelled, Section& c) {
        c.*member = s.choice(spelled, c.*member, choices);
      };
    if (null_if_empty)
      write = [member](JsonWriter& w, const char* key, const Section& c) {
        if ((c.*member).empty()) w.key(key).null();
        else w.member(key, c.*member);
      };
  }

  const char* key;
  // Reads the member from the key as the file spells it; `c` holds the default. Empty: read by hand.
  std::function<void(const ConfigSection& s, const std::string& spelled, Section& c)> read;
  std::function<void(JsonWriter& w, const char* key, const Section& c)> write;  // empty: not written back
};

// The keys of a table, for ConfigSection::check_keys.
template <typename Section>
std::vector<std::string> field_keys(const std::vector<Field<Section>>& fields) {
  std::vector<std::string> keys;
  for (const Field<Section>& field : fields) keys.push_back(field.key);
  return keys;
}

// Reads each member of the table into `c`, whose values are the defaults. `spelled` gives the
// key as the file spells it where the section accepts another name for it (DeepSpeed's aliases).
using Spelling = std::function<std::string(const std::string& key)>;
template <typename Section>
void read_fields(const ConfigSection& s, const std::vector<Field<Section>>& fields, Section& c,
                 const Spelling& spelled = {}) {
  for (const Field<Section>& field : fields)
    if (field.read) field.read(s, spelled ? spelled(field.key) : std::string(field.key), c);
}

// The section from its table: its unknown keys refused, then its members read.
template <typename Section>
Section read_section(const ConfigSection& s, const std::vector<Field<Section>>& fields, const Spelling& spelled = {}) {
  s.check_keys(field_keys(fields));
  Section c;
  read_fields(s, fields, c, spelled);
  return c;
}

// Writes the table's keys that are written back, in its order, into the open object.
template <typename Section>
void write_fields(JsonWriter& w, const std::vector<Field<Section>>& fields, const Section& c) {
  for (const Field<Section>& field : fields)
    if (field.write) field.write(w, field.key, c);
}

template <typename Owner, typename T>
Owner owner_of(T Owner::*);  // the struct a member pointer points into (for decltype)

// The Write of a section nested in another, from its own table:
//   {"fp16", write_object<&Config::fp16, kFp16Fields>}
template <auto member, const auto& fields, JsonWriter::Layout layout = JsonWriter::Layout::Pretty>
void write_object(JsonWriter& w, const char* key, const decltype(owner_of(member))& c) {
  w.key(key).begin_object(layout);
  write_fields(w, fields, c.*member);
  w.end_object();
}

}  // namespace fathom
