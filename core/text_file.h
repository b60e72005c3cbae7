#pragma once
// Whole small files as text: the JSON a model folder holds (config.json, the shard index), read
// at once and written in one go.

#include <string>

namespace fathom {

// The file's bytes; an error naming the path when it cannot be read.
std::string read_text_file(const std::string& path);
// Replaces the file with `text`; an error naming the path when it cannot be written.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace fathom
