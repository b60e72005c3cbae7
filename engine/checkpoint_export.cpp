#include "engine/checkpoint_export.h"

#include <memory>
#include <vector>

#include "core/error.h"
#include "engine/checkpoint_reader.h"
#include "nn/safetensors.h"

namespace fathom {

ExportSummary export_checkpoint(const std::string& dir, const std::string& tag, const std::string& out, DType dtype) {
  FATHOM_CHECK(is_floating_point(dtype), "export: the dtype must be f32, bf16 or f16, got ", dtype_name(dtype));
  CheckpointReader reader(tag.empty() ? find_checkpoint_dir(dir) : dir, tag);
  ExportSummary summary{.tag = reader.tag(),
                        .world_size = reader.world_size(),
                        .tensor_parallel_size = reader.tensor_parallel_size(),
                        .pipeline_parallel_size = reader.pipeline_parallel_size(),
                        .zero_stage = reader.zero_stage(),
                        .source = reader.has("master") ? "master" : "param"};
  // One tensor in memory at a time: read whole when the file asks for its first part, let go
  // after its last.
  std::vector<nn::StreamedTensor> tensors;
  for (const std::string& name : reader.parameter_names()) {
    const Shape shape = reader.whole_shape(name);
    const int64_t numel = shape_numel(shape);
    summary.parameters += numel;
    auto held = std::make_shared<Tensor>();
    tensors.push_back({name, dtype, shape,
                       [&reader, source = summary.source, name, dtype, numel, held](int64_t begin, int64_t count) {
                         if (begin == 0) *held = reader.read_whole(source, name, DType::F32).to(dtype).reshape({-1});
                         const Tensor part = held->narrow(0, begin, count);
                         if (begin + count == numel) *held = Tensor();  // `part` keeps it until written
                         return part;
                       }});
  }
  summary.tensors = tensors.size();
  nn::save_safetensors_streamed(out, std::move(tensors), {{"fathom_checkpoint", dir + "/" + reader.tag()}});
  return summary;
}

}  // namespace fathom
