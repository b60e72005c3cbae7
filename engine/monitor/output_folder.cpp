#include "engine/monitor/output_folder.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace fathom {

void create_output_folder(const std::string& folder, const std::string& section, const std::string& key) {
  if (folder.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  FATHOM_CHECK(!error, section, ": cannot create ", folder, " (", error.message(), "); check ", key);
}

}  // namespace fathom
