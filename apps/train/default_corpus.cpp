#include "apps/train/default_corpus.h"

// The corpus file (made at build time by make_corpus.cmake) is pulled into .rodata by the
// assembler; FATHOM_CORPUS_FILE is its path as a string literal.
asm(".section .rodata\n"
    ".balign 64\n"
    ".global fathom_default_corpus_begin\n"
    "fathom_default_corpus_begin:\n"
    ".incbin \"" FATHOM_CORPUS_FILE "\"\n"
    ".global fathom_default_corpus_end\n"
    "fathom_default_corpus_end:\n"
    ".byte 0\n"
    ".previous\n");

extern "C" const char fathom_default_corpus_begin[];
extern "C" const char fathom_default_corpus_end[];

namespace fathom::apps {

std::string_view default_corpus() {
  return std::string_view(fathom_default_corpus_begin,
                          static_cast<size_t>(fathom_default_corpus_end - fathom_default_corpus_begin));
}

}  // namespace fathom::apps
