#pragma once
// Token files: the two on-disk formats GPT-2 training data comes in.
//
//  nanoGPT (prepare.py):  the whole file is uint16 little-endian token ids, nothing else.
//  llm.c (dev/data/*.py): a 1024-byte header of 256 little-endian int32 — [0] magic 20240520,
//                         [1] version 1, [2] token count, the rest zero — then that many uint16
//                         token ids, and nothing after them.
// docs/data.md draws both byte layouts.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/token_stream.h"

namespace fathom {

enum class TokenFileFormat {
  Auto,     // llm.c when the file starts with the llm.c magic, nanoGPT otherwise
  NanoGPT,  // raw uint16
  LlmC,     // 256-int32 header, then uint16
};

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

const char* token_file_format_name(TokenFileFormat format);  // "auto", "nanoGPT", "llm.c"

// Maps `path` and checks it against `format`: never crashes on a truncated or garbage file,
// throws an error naming the file, the offending value or byte count, and the fix.
TokenStream read_token_file(const std::string& path, TokenFileFormat format = TokenFileFormat::Auto);

// Writes `tokens` in `format` (Auto means nanoGPT): for tests, tools and data preparation.
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens, TokenFileFormat format);

}  // namespace fathom
