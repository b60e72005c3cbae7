#pragma once
// Reading a checkpoint written by Engine::save_checkpoint (docs/checkpoints.md): its index, and
// any flat range of any per-element state ("param", "master", "optim.<state>") from whichever
// saved ranks' files hold it, as the index's shard table says, each piece checked against the
// index's checksum. Used by Engine::load_checkpoint (resharding to this engine's layout) and
// fathom-export.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/json.h"
#include "engine/checkpoint/partitions.h"
#include "nn/safetensors.h"
#include "zero/partition.h"

namespace fathom {

inline constexpr const char* kCheckpointFormat = "fathom-checkpoint-2";

// The checkpoint folder `dir` names: `dir` itself when it holds `latest` (or, given a tag, the
// tag's folder), or `dir`/checkpoints when `dir` is a fathom-train --out folder. Otherwise an
// error listing what it looked for.
std::string find_checkpoint_dir(const std::string& dir, const std::string& tag = "");

class CheckpointReader {
 public:
  // tag "": the one `<dir>/latest` names. Errors name the missing file and the fix.
  CheckpointReader(const std::string& dir, std::string tag);

  const std::string& tag() const { return tag_; }
  const JsonValue& index() const { return index_; }
  const std::string& index_path() const { return index_path_; }
  // The data-parallel, tensor-parallel and pipeline sizes and ZeRO stage it was saved at.
  int world_size() const { return world_; }
  int tensor_parallel_size() const { return tensor_size_; }
  int pipeline_parallel_size() const { return pipeline_size_; }
  int zero_stage() const { return stage_; }
  int64_t parameters() const { return numel_; }  // flat coordinates, over every partition
  // Every parameter of every partition (engine/checkpoint/partitions.h).
  const std::vector<SavedTensor>& tensors() const { return tensors_; }
  // The parameters' names, each once (a tied copy on two stages too), in the model's order.
  std::vector<std::string> parameter_names() const;

  // True when the checkpoint has per-element state `name`.
  bool has(const std::string& name);
  // Fills `target` (flat over `range` of the model's flat coordinates) with state `name`.
  void read(const std::string& name, const Tensor& target, zero::Range range);
  // Parameter `name`'s shape in the unsplit model (what read_whole gives).
  Shape whole_shape(const std::string& name) const;
  // State `state` of parameter `name` whole, as the unsplit model holds it (tensor-parallel
  // shards assembled, padding dropped), in `dtype`.
  Tensor read_whole(const std::string& state, const std::string& name, DType dtype);

 private:
  // What one saved rank wrote: its flat range, and per state its file and checksum.
  struct Shard {
    zero::Range range;
    std::map<std::string, std::string> file_of;   // state -> file name in the tag folder
    std::map<std::string, std::string> checksum;  // state -> 16 hex digits
  };
  const nn::SafetensorsFile& file(const std::string& name);

  std::string dir_, tag_, index_path_;
  JsonValue index_;
  int world_ = 1, tensor_size_ = 1, pipeline_size_ = 1, stage_ = 0;
  int64_t numel_ = 0;
  std::vector<Shard> shards_;
  std::vector<SavedTensor> tensors_;
  std::map<std::string, std::unique_ptr<nn::SafetensorsFile>> files_;  // opened on first use
  std::set<std::string> verified_;  // "file/state" whose checksum has been checked
};

}  // namespace fathom
