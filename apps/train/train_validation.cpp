#include "apps/train/train_validation.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "engine/data/collate.h"
#include "engine/pipeline_executor.h"

namespace fathom::apps {

double validation_loss(const TrainModel& model, const Dataset& val, int64_t samples, int64_t micro_batch,
                       parallel::Communicator& data_group) {
  samples = std::min(samples, val.size());
  if (samples <= 0) return std::nan("");
  autograd::NoGradGuard no_grad;
  nn::Module& module = *model.module();
  module.eval();
  const Device device = module.device();
  const LossFunction loss = [&](const autograd::Variable& output, const Batch& batch) {
    return model.loss(output, batch.targets.to(device));
  };
  const Sample like = val.get(0);
  // Every sample weighs the same: each micro-batch's mean loss counts once per row.
  double total = 0;
  std::vector<int64_t> indices;
  const auto evaluate = [&] {
    std::vector<Sample> rows;
    for (int64_t index : indices) rows.push_back(val.get(index));
    const Sample stacked = collate(rows, indices, like);
    const Batch batch{stacked.input, stacked.target};
    const double mean = model.pipeline() ? pipeline_loss(*model.pipeline(), batch, loss)
                                         : loss(module(autograd::Variable(batch.inputs.to(device))), batch).item();
    total += mean * static_cast<double>(indices.size());
    indices.clear();
  };
  for (int64_t index = data_group.rank(); index < samples; index += data_group.size()) {
    indices.push_back(index);
    if (static_cast<int64_t>(indices.size()) == micro_batch) evaluate();
  }
  if (!indices.empty()) evaluate();
  module.train();
  return data_group.all_reduce_scalar(total) / static_cast<double>(samples);
}

}  // namespace fathom::apps
