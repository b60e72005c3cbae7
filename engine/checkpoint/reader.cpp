#include "engine/checkpoint/reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "engine/checkpoint/layout.h"

namespace fathom {
namespace fs = std::filesystem;

namespace {
std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  FATHOM_CHECK(in, "checkpoint: cannot read ", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

std::string find_checkpoint_dir(const std::string& dir, const std::string& tag) {
  const fs::path given(dir), nested = fs::path(dir) / "checkpoints";
  const fs::path marker = tag.empty() ? fs::path("latest") : fs::path(tag) / "index.json";
  if (fs::exists(given / marker)) return given.string();
  if (fs::exists(nested / marker)) return nested.string();
  FATHOM_FAIL("no checkpoint ", tag.empty() ? std::string() : "\"" + tag + "\" ", "in ", dir, ": looked for ",
              (given / marker).string(), " and ", (nested / marker).string(),
              " (a fathom-train --out folder keeps its checkpoints in checkpoints/); pass the folder that holds ",
              tag.empty() ? "`latest`, or save a checkpoint first (--save-every)" : "the tag's folder, or another --tag");
}

CheckpointReader::CheckpointReader(const std::string& dir, std::string tag) : dir_(dir), tag_(std::move(tag)) {
  if (tag_.empty()) {
    const fs::path latest = fs::path(dir) / "latest";
    FATHOM_CHECK(fs::exists(latest), "load_checkpoint: no checkpoint in ", dir, " (", latest.string(),
                 " does not exist); pass a tag or save one first");
    tag_ = read_text(latest);
    // Written by hand (`echo tag > latest`) it ends in a newline: whitespace around is not the
    // tag's, as DeepSpeed strips it too.
    const size_t first = tag_.find_first_not_of(" \t\r\n"), last = tag_.find_last_not_of(" \t\r\n");
    tag_ = first == std::string::npos ? "" : tag_.substr(first, last - first + 1);
    FATHOM_CHECK(!tag_.empty(), "load_checkpoint: ", latest.string(), " is empty; write the tag to load into it, "
                 "or pass the tag");
  }
  index_path_ = (fs::path(dir) / tag_ / "index.json").string();
  FATHOM_CHECK(fs::exists(index_path_), "load_checkpoint: ", index_path_, " does not exist; is \"", tag_,
               "\" a complete checkpoint of ", dir, "?");
  index_ = parse_json(read_text(index_path_), index_path_);
  FATHOM_CHECK(index_.at("format").as_string() == kCheckpointFormat, "checkpoint ", index_path_, ": format \"",
               index_.at("format").as_string(), "\", expected \"", kCheckpointFormat,
               "\"; it was written by another version of Fathom");
  FATHOM_CHECK(index_.at("checksum").as_string() == kCheckpointChecksum, "checkpoint ", index_path_,
               ": checksum algorithm \"", index_.at("checksum").as_string(), "\", expected \"", kCheckpointChecksum, "\"");
  world_ = static_cast<int>(index_.at("world_size").as_int64());
  stage_ = static_cast<int>(index_.at("zero_stage").as_int64());
  numel_ = index_.at("parameters").as_int64();
  if (const JsonValue* tp = index_.find("tensor_parallel_size")) tensor_size_ = static_cast<int>(tp->as_int64());
  if (const JsonValue* pp = index_.find("pipeline_parallel_size")) pipeline_size_ = static_cast<int>(pp->as_int64());
  const auto& shards = index_.at("shards").as_array();
  FATHOM_CHECK(static_cast<int>(shards.size()) == world_ * tensor_size_ * pipeline_size_, "checkpoint ", index_path_,
               ": ", shards.size(), " shards listed for ", world_, " data-parallel x ", tensor_size_,
               " tensor-parallel x ", pipeline_size_, " pipeline ranks; the index is damaged");
  tensors_ = read_tensor_table(index_.at("tensors"), index_path_);
  for (const auto& entry : shards) {
    Shard shard;
    shard.range = {entry.at("begin").as_int64(), entry.at("end").as_int64()};
    for (const auto& [state, info] : entry.at("states").as_object()) {
      shard.file_of[state] = info.at("file").as_string();
      shard.checksum[state] = info.at("checksum").as_string();
    }
    shards_.push_back(std::move(shard));
  }
}

const nn::SafetensorsFile& CheckpointReader::file(const std::string& name) {
  std::unique_ptr<nn::SafetensorsFile>& opened = files_[name];
  if (!opened) {
    const fs::path path = fs::path(dir_) / tag_ / name;
    FATHOM_CHECK(fs::exists(path), "checkpoint ", (fs::path(dir_) / tag_).string(), ": ", name,
                 " is missing (the checkpoint was saved by a job of ", world_, " ranks); copy the whole folder");
    opened = std::make_unique<nn::SafetensorsFile>(path.string());
  }
  return *opened;
}

bool CheckpointReader::has(const std::string& name) {
  for (const Shard& shard : shards_)
    if (shard.range.size() > 0) return shard.file_of.count(name) > 0;
  return false;
}

void CheckpointReader::read(const std::string& name, const Tensor& target, zero::Range range) {
  int64_t filled = 0;
  for (size_t r = 0; r < shards_.size(); ++r) {
    const Shard& shard = shards_[r];
    if (std::max(shard.range.begin, range.begin) >= std::min(shard.range.end, range.end)) continue;
    const auto file_name = shard.file_of.find(name);
    FATHOM_CHECK(file_name != shard.file_of.end(), "checkpoint ", index_path_, ": shard ", r, " saved no \"", name,
                 "\"");
    const nn::SafetensorsFile& f = file(file_name->second);
    const Tensor part = f.get(name);
    FATHOM_CHECK(part.numel() == shard.range.size(), "checkpoint ", f.path(), ": tensor \"", name, "\" has ",
                 part.numel(), " elements, but shard ", r, " of ", shards_.size(), " saved ", shard.range.size());
    if (verified_.insert(file_name->second + "/" + name).second)
      FATHOM_CHECK(shard.checksum.at(name) == checksum_hex(checkpoint_checksum(part)), "checkpoint ", f.path(),
                   ": tensor \"", name, "\" fails its checksum (the file is corrupt); restore it or load another tag");
    filled += copy_flat_overlap(part, shard.range, target, range);
  }
  FATHOM_CHECK(filled == range.size(), "checkpoint ", (fs::path(dir_) / tag_).string(), ": state \"", name, "\" covers ",
               filled, " of ", range.size(), " needed elements");
}

std::vector<std::string> CheckpointReader::parameter_names() const {
  std::vector<std::string> names;
  for (const SavedTensor& entry : tensors_)
    if (entry.tensor_rank == 0 && std::find(names.begin(), names.end(), entry.name) == names.end())
      names.push_back(entry.name);
  return names;
}

Shape CheckpointReader::whole_shape(const std::string& name) const {
  for (const SavedTensor& entry : tensors_)
    if (entry.name == name) return entry.full_shape();
  FATHOM_FAIL("checkpoint ", index_path_, ": no tensor \"", name, "\"");
}

Tensor CheckpointReader::read_whole(const std::string& state, const std::string& name, DType dtype) {
  Tensor whole;
  int stage = -1;  // a tied copy is read from the first stage that holds it
  for (const SavedTensor& entry : tensors_) {
    if (entry.name != name || (stage >= 0 && entry.pipeline_stage != stage)) continue;
    stage = entry.pipeline_stage;
    Tensor part = Tensor::empty(entry.shape, dtype);
    read(state, part.view({-1}), entry.range());
    if (!entry.placement.sharded()) return part;  // replicated: every partition's copy is the same
    if (!whole.defined()) whole = Tensor::zeros(entry.full_shape(), dtype);
    nn::place_shard(part, entry.placement, whole);
  }
  FATHOM_CHECK(whole.defined(), "checkpoint ", index_path_, ": no tensor \"", name, "\"");
  return whole;
}

}  // namespace fathom
