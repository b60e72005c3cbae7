#include "core/text_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace fathom {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FATHOM_CHECK(in, "cannot open ", path);
  std::ostringstream text;
  text << in.rdbuf();
  FATHOM_CHECK(!in.bad(), "cannot read ", path);
  return text.str();
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  FATHOM_CHECK(out, "cannot write ", path);
  out << text;
  FATHOM_CHECK(out.flush(), "cannot write ", path);
}

}  // namespace fathom
