#include "engine/data/token_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"

namespace fathom {

namespace {

int32_t read_int32(const unsigned char* at) {
  int32_t value;
  std::memcpy(&value, at, 4);
  return value;
}

bool starts_with_llmc_magic(const MappedFile& file) {
  return file.size() >= 4 && read_int32(file.data()) == kLlmcMagic;
}

TokenStream stream_over(const std::shared_ptr<const MappedFile>& file, int64_t first_byte, int64_t tokens) {
  TokenStream stream;
  stream.owner = file;
  stream.bytes = file->data() + first_byte;
  stream.size = tokens;
  stream.width = 2;
  stream.source = "token file '" + file->path() + "'";
  stream.first_byte = first_byte;
  return stream;
}

TokenStream read_nanogpt(const std::shared_ptr<const MappedFile>& file) {
  const std::string where = "token file '" + file->path() + "' (nanoGPT raw uint16): ";
  const uint64_t bytes = file->size();
  FATHOM_CHECK(bytes > 0, where, "the file is empty (0 bytes); it holds no tokens — check that data preparation finished");
  FATHOM_CHECK(bytes % 2 == 0, where, "odd length of ", bytes, " bytes: tokens are 2 bytes each, so the last byte (offset ",
               bytes - 1, ") is half a token; the file is truncated or not a token file");
  return stream_over(file, 0, static_cast<int64_t>(bytes / 2));
}

TokenStream read_llmc(const std::shared_ptr<const MappedFile>& file) {
  const std::string where = "token file '" + file->path() + "' (llm.c): ";
  const uint64_t bytes = file->size();
  FATHOM_CHECK(bytes > 0, where, "the file is empty (0 bytes); it holds no header and no tokens — check that data "
               "preparation finished");
  FATHOM_CHECK(bytes >= static_cast<uint64_t>(kLlmcHeaderBytes), where, "the file is ", bytes,
               " bytes, shorter than the ", kLlmcHeaderBytes, "-byte header (256 int32); it is truncated");
  const int32_t magic = read_int32(file->data());
  FATHOM_CHECK(magic == kLlmcMagic, where, "wrong magic ", magic, " at byte 0, expected ", kLlmcMagic,
               "; this is not an llm.c token file (a nanoGPT raw file? read it with TokenFileFormat::NanoGPT)");
  const int32_t version = read_int32(file->data() + 4);
  FATHOM_CHECK(version == kLlmcVersion, where, "unsupported version ", version, " at byte 4; Fathom reads version ",
               kLlmcVersion, " (uint16 tokens)");
  const int32_t count = read_int32(file->data() + 8);
  FATHOM_CHECK(count > 0, where, "token count ", count, " at byte 8 must be positive; the header is corrupt or the "
               "file holds no tokens");
  const uint64_t end = static_cast<uint64_t>(kLlmcHeaderBytes) + 2 * static_cast<uint64_t>(count);
  FATHOM_CHECK(end <= bytes, where, "the header (byte 8) says ", count, " tokens, which end at byte ", end,
               ", but the file is only ", bytes, " bytes; it is truncated");
  FATHOM_CHECK(end == bytes, where, "the header (byte 8) says ", count, " tokens, which end at byte ", end,
               ", but the file is ", bytes, " bytes (", bytes - end,
               " trailing bytes); the header's token count is wrong or two files were concatenated");
  return stream_over(file, kLlmcHeaderBytes, count);
}

}  // namespace

const char* token_file_format_name(TokenFileFormat format) {
  switch (format) {
    case TokenFileFormat::Auto: return "auto";
    case TokenFileFormat::NanoGPT: return "nanoGPT";
    case TokenFileFormat::LlmC: return "llm.c";
  }
  return "?";
}

TokenStream read_token_file(const std::string& path, TokenFileFormat format) {
  const std::shared_ptr<const MappedFile> file = MappedFile::open(path);
  if (format == TokenFileFormat::Auto)
    format = starts_with_llmc_magic(*file) ? TokenFileFormat::LlmC : TokenFileFormat::NanoGPT;
  return format == TokenFileFormat::LlmC ? read_llmc(file) : read_nanogpt(file);
}

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens, TokenFileFormat format) {
  struct Closer {
    std::FILE* f;
    ~Closer() {
      if (f) std::fclose(f);
    }
  } out{std::fopen(path.c_str(), "wb")};
  FATHOM_CHECK(out.f != nullptr, "token file '", path, "': cannot open for writing: ", std::strerror(errno));
  if (format == TokenFileFormat::LlmC) {
    FATHOM_CHECK(tokens.size() <= 0x7fffffffu, "token file '", path, "': ", tokens.size(),
                 " tokens do not fit the llm.c header's int32 count; split the data into shards");
    int32_t header[256] = {};
    header[0] = kLlmcMagic;
    header[1] = kLlmcVersion;
    header[2] = static_cast<int32_t>(tokens.size());
    FATHOM_CHECK(std::fwrite(header, sizeof header, 1, out.f) == 1, "token file '", path,
                 "': cannot write the header: ", std::strerror(errno));
  }
  FATHOM_CHECK(std::fwrite(tokens.data(), 2, tokens.size(), out.f) == tokens.size(), "token file '", path,
               "': cannot write ", tokens.size(), " tokens: ", std::strerror(errno));
  const int closed = std::fclose(out.f);
  out.f = nullptr;
  FATHOM_CHECK(closed == 0, "token file '", path, "': cannot finish writing: ", std::strerror(errno));
}

}  // namespace fathom
