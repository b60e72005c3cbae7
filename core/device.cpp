#include "core/device.h"

#include <charconv>

#include "core/error.h"

namespace fathom {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int index = -1;
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    auto [end, ec] = std::from_chars(first, last, index);
    if (ec == std::errc() && end == last && first != last && index >= 0) return cuda(index);
  }
  FATHOM_FAIL("unknown device \"", text, "\"; use cpu, cuda or cuda:<index>");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

}  // namespace fathom
