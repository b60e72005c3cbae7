#pragma once
// A Hugging Face model folder's weights, in and out: `model.safetensors`, or shards
// `model-0000k-of-0000n.safetensors` named tensor by tensor in `model.safetensors.index.json`.
//
// Reading maps every shard (no tensor is read until asked for) and checks the folder against the
// model before any value is copied: every parameter present with its shape, no tensor the model
// does not have (lm_head.weight is allowed when embeddings are tied: transformers writes none,
// older savers one), a float dtype. A model built under nn::DeferredInit is not filled: each
// parameter records a read of its tensor from the mapped shard, which ZeRO stage 3 runs when it
// keeps that parameter's part — so a model larger than one rank's memory loads shard by shard.
//
// Writing gives the same layout: config.json (models/hf_config.h), then the weights in shards of
// at most `max_shard_bytes` (one file when they fit, else model-0000k-of-0000n plus the index),
// each written atomically, tensors converted to `dtype`, and no lm_head.weight when it is tied —
// what transformers' save_pretrained writes, so AutoModelForCausalLM.from_pretrained loads it.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/decoder.h"
#include "nn/safetensors.h"

namespace fathom::models {

class HfWeights {
 public:
  // `folder`: the model folder (or one .safetensors file). Throws naming the folder when it holds
  // no weights, and the index and file when the index names a shard that is not there.
  explicit HfWeights(const std::string& folder);
  const std::string& folder() const { return folder_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return files_.count(name) != 0; }
  const nn::SafetensorsTensorInfo& info(const std::string& name) const;
  // A view of the mapped bytes (kept alive by the tensor), or a copy when unaligned.
  Tensor get(const std::string& name) const;
  const std::string& file_of(const std::string& name) const;  // the shard's path
  size_t num_files() const { return num_files_; }

 private:
  const nn::SafetensorsFile& file(const std::string& name) const;
  std::string folder_;
  std::map<std::string, std::shared_ptr<const nn::SafetensorsFile>> files_;  // by tensor name
  size_t num_files_ = 0;
};

// Fills `model` (or records deferred reads) from the folder's weights, converting dtypes; a gpt2
// model reads GPT-2's own names and layout (models/gpt2_adapter.h).
void load_hf_weights(Decoder& model, const std::string& folder);

struct HfSaveOptions {
  DType dtype = DType::F32;  // the stored tensors' dtype (and config.json's torch_dtype)
  int64_t max_shard_bytes = int64_t{5} << 30;  // save_pretrained's default, 5 GB
};

// `weights` in the model's names and order (Decoder::state_dict, or an engine's consolidated
// state dict); a gpt2 model's are written in GPT-2's names and layout. Returns the files
// written, config.json first.
std::vector<std::string> save_hf_model(const DecoderConfig& config, const nn::NamedTensors& weights,
                                       const std::string& folder, const HfSaveOptions& options = {});

}  // namespace fathom::models
