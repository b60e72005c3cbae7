#include "engine/checkpoint_reader.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "engine/checkpoint_layout.h"

namespace fathom::checkpoint {
namespace fs = std::filesystem;

std::string rank_file_name(int rank) {
  char name[40];
  std::snprintf(name, sizeof name, "rank_%05d.safetensors", rank);
  return name;
}

namespace {
std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  FATHOM_CHECK(in, "checkpoint: cannot read ", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

CheckpointReader::CheckpointReader(const std::string& dir, std::string tag) : dir_(dir), tag_(std::move(tag)) {
  if (tag_.empty()) {
    const fs::path latest = fs::path(dir) / "latest";
    FATHOM_CHECK(fs::exists(latest), "load_checkpoint: no checkpoint in ", dir, " (", latest.string(),
                 " does not exist); pass a tag or save one first");
    tag_ = read_text(latest);
  }
  index_path_ = (fs::path(dir) / tag_ / "index.json").string();
  FATHOM_CHECK(fs::exists(index_path_), "load_checkpoint: ", index_path_, " does not exist; is \"", tag_,
               "\" a complete checkpoint of ", dir, "?");
  index_ = nn::json::parse(read_text(index_path_), index_path_);
  FATHOM_CHECK(index_.at("format").as_string() == kFormat, "checkpoint ", index_path_, ": format \"",
               index_.at("format").as_string(), "\", expected \"", kFormat, "\"");
  world_ = static_cast<int>(index_.at("world_size").as_int64());
  stage_ = static_cast<int>(index_.at("zero_stage").as_int64());
  numel_ = index_.at("parameters").as_int64();
  files_.resize(world_);
}

const nn::SafetensorsFile& CheckpointReader::file(int r) {
  if (!files_[r]) {
    const fs::path path = fs::path(dir_) / tag_ / rank_file_name(r);
    FATHOM_CHECK(fs::exists(path), "checkpoint ", (fs::path(dir_) / tag_).string(), ": ", rank_file_name(r),
                 " is missing (the checkpoint was saved by ", world_, " ranks); copy the whole folder");
    files_[r] = std::make_unique<nn::SafetensorsFile>(path.string());
  }
  return *files_[r];
}

bool CheckpointReader::has(const std::string& name) {
  for (int r = 0; r < world_; ++r)
    if (saved_range(numel_, world_, r, stage_).size() > 0) return file(r).contains(name);
  return false;
}

void CheckpointReader::read(const std::string& name, const Tensor& target, zero::Range range) {
  int64_t filled = 0;
  for (int r = 0; r < world_; ++r) {
    const zero::Range saved = saved_range(numel_, world_, r, stage_);
    if (std::max(saved.begin, range.begin) >= std::min(saved.end, range.end)) continue;
    const nn::SafetensorsFile& f = file(r);
    const Tensor part = f.get(name);
    FATHOM_CHECK(part.numel() == saved.size(), "checkpoint ", f.path(), ": tensor \"", name, "\" has ", part.numel(),
                 " elements, but rank ", r, " of ", world_, " saved ", saved.size());
    const auto sum = f.metadata().find("checksum." + name);
    FATHOM_CHECK(sum != f.metadata().end() && sum->second == checksum(part), "checkpoint ", f.path(), ": tensor \"",
                 name, "\" fails its checksum (the file is corrupt); restore it or load another tag");
    filled += copy_overlap(part, saved, target, range);
  }
  FATHOM_CHECK(filled == range.size(), "checkpoint ", (fs::path(dir_) / tag_).string(), ": state \"", name, "\" covers ",
               filled, " of ", range.size(), " needed elements");
}

}  // namespace fathom::checkpoint
