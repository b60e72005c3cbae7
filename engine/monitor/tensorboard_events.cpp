#include "engine/monitor/tensorboard_events.h"

#include <array>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace fathom {
namespace {

constexpr uint32_t kCastagnoli = 0x82F63B78;  // the reflected CRC-32C polynomial

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ kCastagnoli : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_fixed(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

// Protobuf wire types: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit.
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field << 3 | wire_type));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_double(std::string& out, int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  put_key(out, field, 1);
  put_fixed(out, bits, 8);
}

std::string event_header(double wall_time) {
  std::string event;
  put_double(event, 1, wall_time);
  return event;
}

// --- reading ---

class Reader {
 public:
  Reader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  bool done() const { return pos_ >= bytes_.size(); }
  size_t pos() const { return pos_; }
  std::string_view take(size_t n) {
    FATHOM_CHECK(n <= bytes_.size() - pos_, what_, ": truncated at byte ", pos_, " (", n, " more bytes expected)");
    const std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t fixed(int n) {
    const std::string_view b = take(static_cast<size_t>(n));
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
    return v;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto byte = static_cast<unsigned char>(take(1)[0]);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    FATHOM_FAIL(what_, ": a varint longer than 10 bytes at byte ", pos_);
  }
  // Skips a field this reader does not use.
  void skip(int wire_type) {
    if (wire_type == 0)
      varint();
    else if (wire_type == 1)
      take(8);
    else if (wire_type == 2)
      take(varint());
    else if (wire_type == 5)
      take(4);
    else
      FATHOM_FAIL(what_, ": unknown protobuf wire type ", wire_type, " at byte ", pos_);
  }

 private:
  std::string_view bytes_;
  std::string what_;
  size_t pos_ = 0;
};

double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void read_summary_value(std::string_view bytes, const std::string& what, TensorBoardScalar& scalar, bool& has_value) {
  Reader r(bytes, what);
  while (!r.done()) {
    const uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 2)
      scalar.tag = std::string(r.take(r.varint()));
    else if (field == 2 && wire == 5)
      scalar.value = as_float(static_cast<uint32_t>(r.fixed(4))), has_value = true;
    else
      r.skip(wire);
  }
}

void read_event(std::string_view bytes, const std::string& what, TensorBoardFile& file) {
  Reader r(bytes, what);
  double wall_time = 0;
  int64_t step = 0;
  std::vector<TensorBoardScalar> values;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 1) {
      wall_time = as_double(r.fixed(8));
    } else if (field == 2 && wire == 0) {
      step = static_cast<int64_t>(r.varint());
    } else if (field == 3 && wire == 2) {
      file.file_version = std::string(r.take(r.varint()));
    } else if (field == 5 && wire == 2) {
      Reader summary(r.take(r.varint()), what);
      while (!summary.done()) {
        const uint64_t k = summary.varint();
        if ((k >> 3) == 1 && (k & 7) == 2) {
          TensorBoardScalar scalar;
          bool has_value = false;
          read_summary_value(summary.take(summary.varint()), what, scalar, has_value);
          if (has_value) values.push_back(scalar);  // images, histograms, tensors: not scalars
        } else {
          summary.skip(static_cast<int>(k & 7));
        }
      }
    } else {
      r.skip(wire);
    }
  }
  for (TensorBoardScalar& scalar : values) {
    scalar.step = step;
    scalar.wall_time = wall_time;
    file.scalars.push_back(std::move(scalar));
  }
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFF;
  for (char c : bytes) crc = crc_table()[(crc ^ static_cast<unsigned char>(c)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFF;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view event) {
  std::string length;
  put_fixed(length, event.size(), 8);
  std::string out = length;
  put_fixed(out, masked_crc32c(length), 4);
  out.append(event);
  put_fixed(out, masked_crc32c(event), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string event = event_header(wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string event = event_header(wall_time);
  put_key(event, 2, 0);
  put_varint(event, static_cast<uint64_t>(step));
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  put_key(summary_value, 2, 5);
  put_fixed(summary_value, bits, 4);
  std::string summary;
  put_bytes(summary, 1, summary_value);
  put_bytes(event, 5, summary);
  return event;
}

TensorBoardFile read_tensorboard_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FATHOM_CHECK(in, "TensorBoard file ", path, ": cannot open it");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string bytes = text.str();
  Reader r(bytes, "TensorBoard file " + path);
  TensorBoardFile file;
  while (!r.done()) {
    const size_t at = r.pos();
    const std::string_view length_bytes = r.take(8);
    const uint32_t length_crc = static_cast<uint32_t>(r.fixed(4));
    FATHOM_CHECK(length_crc == masked_crc32c(length_bytes), "TensorBoard file ", path, ": the record at byte ", at,
                 " fails its length CRC (the file is corrupt or not a TFRecord file)");
    uint64_t length = 0;
    for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<unsigned char>(length_bytes[i])) << (8 * i);
    const std::string_view event = r.take(length);
    FATHOM_CHECK(static_cast<uint32_t>(r.fixed(4)) == masked_crc32c(event), "TensorBoard file ", path,
                 ": the record at byte ", at, " fails its data CRC (the file is corrupt)");
    read_event(event, "TensorBoard file " + path, file);
  }
  return file;
}

}  // namespace fathom
