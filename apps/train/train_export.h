#pragma once
// fathom-export of a fathom-train checkpoint, which knows its model: written as that model's
// Hugging Face folder (config.json and safetensors shards, GPT-2's in its own names and Conv1D
// layout), or as one .safetensors file in the Hugging Face names (GPT-2's with the metadata
// fathom-generate reads). The checkpoint's tensors are first assembled into a staging file in the model's own
// names, which is then mapped and rewritten shard by shard, so memory stays bounded.
// A checkpoint of GPT-2 from before the one decoder (ResumePoint::legacy_gpt2()) already holds
// GPT-2's names: only Conv1D's layout is applied, so its weights carry on in a Hugging Face
// folder that fathom-train --model continues from.

#include <string>

#include "apps/train/train_resume.h"
#include "engine/checkpoint/export.h"

namespace fathom::apps {

// `out`: a folder, or a file ending in .safetensors. `point` must have its run (point.run).
ExportSummary export_train_run(const ResumePoint& point, const std::string& out, DType dtype);

}  // namespace fathom::apps
