#include "apps/train/train_export.h"

#include <filesystem>

#include "models/gpt2_adapter.h"
#include "models/hf_config.h"
#include "models/hf_weights.h"
#include "nn/safetensors.h"

namespace fathom::apps {
namespace fs = std::filesystem;

ExportSummary export_train_run(const apps::ResumePoint& point, const std::string& out, DType dtype) {
  models::DecoderConfig model = point.run->model.decoder;
  model.dtype = dtype;
  const bool folder = fs::path(out).extension() != ".safetensors";
  if (point.legacy_gpt2()) {  // already GPT-2's names: only Conv1D's layout to apply
    ExportLayout layout;
    layout.transposed = models::is_gpt2_conv1d_weight;
    layout.metadata = models::gpt2_safetensors_metadata(model);
    if (!folder) return export_checkpoint(point.dir, point.tag, out, dtype, layout);
    fs::create_directories(out);
    models::write_hf_config(model, (fs::path(out) / "config.json").string());
    return export_checkpoint(point.dir, point.tag, (fs::path(out) / "model.safetensors").string(), dtype, layout);
  }
  const fs::path staged = (folder ? fs::path(out) : fs::path(out).parent_path()) / ".fathom-export-staged.safetensors";
  fs::create_directories(staged.parent_path());
  const ExportSummary done = export_checkpoint(point.dir, point.tag, staged.string(), dtype);
  {
    const models::HfWeights mapped(staged.string());
    nn::NamedTensors weights;
    for (const std::string& name : point.parameter_names)
      weights.emplace_back(name, mapped.get(name));
    if (folder) {
      models::save_hf_model(model, weights, out, {.dtype = dtype});
    } else if (model.architecture == "gpt2") {
      nn::save_safetensors(out, models::gpt2_tensors(model, weights), models::gpt2_safetensors_metadata(model));
    } else {
      nn::save_safetensors(out, weights, {{"format", "pt"}});
    }
  }
  fs::remove(staged);
  return done;
}


}  // namespace fathom::apps
