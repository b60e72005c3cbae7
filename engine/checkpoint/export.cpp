#include "engine/checkpoint/export.h"

#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/checkpoint/reader.h"
#include "nn/safetensors.h"

namespace fathom {

ExportSummary export_checkpoint(const std::string& dir, const std::string& tag, const std::string& out, DType dtype,
                                const ExportLayout& layout) {
  FATHOM_CHECK(is_floating_point(dtype), "export: the dtype must be f32, bf16 or f16, got ", dtype_name(dtype));
  const std::string folder = find_checkpoint_dir(dir, tag);
  CheckpointReader reader(folder, tag);
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
    Shape shape = reader.whole_shape(name);
    const int64_t numel = shape_numel(shape);
    summary.parameters += numel;
    const bool transposed = layout.transposed && layout.transposed(name);
    FATHOM_CHECK(!transposed || shape.size() == 2, "export: \"", name, "\" has shape ", shape_str(shape),
                 "; only a 2-D tensor can be stored transposed");
    if (transposed) std::swap(shape[0], shape[1]);
    auto held = std::make_shared<Tensor>();
    tensors.push_back({name, dtype, shape,
                       [&reader, source = summary.source, name, dtype, numel, held, transposed](int64_t begin,
                                                                                                int64_t count) {
                         if (begin == 0) {
                           Tensor whole = reader.read_whole(source, name, DType::F32);
                           if (transposed) whole = whole.t().contiguous();
                           *held = whole.to(dtype).reshape({-1});
                         }
                         const Tensor part = held->narrow(0, begin, count);
                         if (begin + count == numel) *held = Tensor();  // `part` keeps it until written
                         return part;
                       }});
  }
  summary.tensors = tensors.size();
  nn::save_safetensors_streamed(out, std::move(tensors),
                                layout.metadata.value_or(std::map<std::string, std::string>{
                                    {"fathom_checkpoint", folder + "/" + reader.tag()}}));
  return summary;
}

}  // namespace fathom
