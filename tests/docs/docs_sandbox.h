// A temporary working directory for a doc snippet that reads or writes files by relative path
// ("ds_config.json", "model.safetensors"), as the reader's program would.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fathom::docs_test {

class Sandbox {
 public:
  explicit Sandbox(const std::string& name)
      : previous_(std::filesystem::current_path()),
        dir_(std::filesystem::temp_directory_path() / ("fathom_docs_" + name + "_" + std::to_string(getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::filesystem::current_path(dir_);
  }
  ~Sandbox() {
    std::filesystem::current_path(previous_);
    std::filesystem::remove_all(dir_);
  }
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  static void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

 private:
  std::filesystem::path previous_, dir_;
};

}  // namespace fathom::docs_test
