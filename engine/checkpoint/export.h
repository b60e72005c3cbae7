#pragma once
// Consolidated weights from any Fathom checkpoint as one safetensors file (fathom-export; like
// DeepSpeed's zero_to_fp32.py, but needing no model code): the checkpoint's index names every
// tensor, its place in the flat layout and which part of the unsplit tensor each rank held, so
// the saved ranks' shards are assembled into whole tensors — one at a time, written as the file
// asks for it, so a model larger than memory exports too. A model family's file format (GPT-2's
// Conv1D layout and metadata, as fathom-train writes it) is an ExportLayout.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace fathom {

// How the file stores the checkpoint's tensors. Default: the model's names, shapes and a
// "fathom_checkpoint" provenance key.
struct ExportLayout {
  std::function<bool(const std::string& name)> transposed;  // stored as its 2-D transpose
  std::optional<std::map<std::string, std::string>> metadata;  // the file's whole metadata
};

struct ExportSummary {
  std::string tag;                        // the checkpoint tag read
  int world_size = 1, tensor_parallel_size = 1, pipeline_parallel_size = 1, zero_stage = 0;
  std::string source;                     // "master" (mixed precision) or "param"
  size_t tensors = 0;
  int64_t parameters = 0;
};

// `dir`: a checkpoint folder or a fathom-train --out folder; `tag` "": the latest. The fp32
// master weights are used when the checkpoint has them, else the saved parameters; written as
// `dtype` (f32, bf16 or f16).
ExportSummary export_checkpoint(const std::string& dir, const std::string& tag, const std::string& out, DType dtype,
                                const ExportLayout& layout = {});

}  // namespace fathom
