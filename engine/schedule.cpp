#include "engine/schedule.h"

namespace fathom {

void GradientAccumulation::run(Engine& engine, const NextBatch& next, const LossFunction& loss) {
  const Device device = engine.module().device();
  bool boundary = false;
  while (!boundary) {
    const Batch batch = next();
    const autograd::Variable output = engine(autograd::Variable(batch.inputs.to(device)), batch.sample_index);
    engine.backward(loss(output, batch));
    boundary = engine.is_gradient_accumulation_boundary();
    engine.step();
  }
}

}  // namespace fathom
