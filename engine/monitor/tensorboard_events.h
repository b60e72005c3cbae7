#pragma once
// TensorBoard's event files, written and read without protobuf: a scalar summary is a handful of
// fields, encoded here by hand.
//
// The file is a sequence of TFRecords: uint64 length, uint32 masked CRC-32C of the length bytes,
// the data, uint32 masked CRC-32C of the data (little-endian). Each record is an `Event` proto:
//   1 wall_time (double), 2 step (int64), 3 file_version (string, the first record:
//   "brain.Event:2"), 5 summary (Summary: repeated 1 value (Value: 1 tag, 2 simple_value float)).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

// CRC-32C (Castagnoli), as TFRecord uses it; crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::string_view bytes);
// TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view bytes);

// One framed record holding `event` (an encoded Event).
std::string tfrecord(std::string_view event);
// An Event with file_version "brain.Event:2" (the first record of a file).
std::string file_version_event(double wall_time);
// An Event with one scalar summary value.
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);

// What a file holds, for tests and tools: every scalar in file order, and its file_version.
struct TensorBoardScalar {
  std::string tag;
  int64_t step = 0;
  float value = 0;
  double wall_time = 0;
};
struct TensorBoardFile {
  std::string file_version;
  std::vector<TensorBoardScalar> scalars;
};
// Throws naming the file and the byte where a record's framing or CRC is wrong.
TensorBoardFile read_tensorboard_file(const std::string& path);

}  // namespace fathom
