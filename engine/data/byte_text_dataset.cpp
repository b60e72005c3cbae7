#include "engine/data/byte_text_dataset.h"

#include <memory>

#include "core/mapped_file.h"

namespace fathom {

ByteTextDataset ByteTextDataset::from_file(const std::string& path, int64_t block_size) {
  const std::shared_ptr<const MappedFile> file = MappedFile::open(path);
  FATHOM_CHECK(file->size() > 0, "text file '", path, "': the file is empty (0 bytes); there is no text to train on");
  TokenStream stream;
  stream.owner = file;
  stream.bytes = file->data();
  stream.size = static_cast<int64_t>(file->size());
  stream.width = 1;
  stream.source = "text file '" + path + "'";
  return ByteTextDataset(std::move(stream), block_size);
}

ByteTextDataset ByteTextDataset::from_string(std::string text, int64_t block_size) {
  FATHOM_CHECK(!text.empty(), "in-memory text: the string is empty; there is no text to train on");
  auto owned = std::make_shared<const std::string>(std::move(text));
  TokenStream stream;
  stream.bytes = reinterpret_cast<const unsigned char*>(owned->data());
  stream.size = static_cast<int64_t>(owned->size());
  stream.owner = owned;
  stream.width = 1;
  stream.source = "in-memory text";
  return ByteTextDataset(std::move(stream), block_size);
}

}  // namespace fathom
