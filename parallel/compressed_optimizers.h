#pragma once
// The communication-compressed optimizers by their DeepSpeed config names: "OneBitAdam",
// "ZeroOneAdam" and "OneBitLamb" (any case, so DeepSpeed's own "OnebitAdam" spelling too). They
// know the data-parallel group, so they are built here rather than by nn::make_optimizer;
// fathom::initialize asks this factory first.

#include <memory>
#include <string>
#include <vector>

#include "nn/optimizer_factory.h"
#include "parallel/communicator.h"

namespace fathom::parallel {

bool is_compressed_optimizer(const std::string& type);
// `data_group`: the ranks whose gradients the optimizer averages. Unknown parameters and values
// out of range are errors naming the parameter, as nn::make_optimizer's.
std::unique_ptr<nn::Optimizer> make_compressed_optimizer(const std::string& type, const nn::OptimizerParams& params,
                                                         std::vector<nn::ParamGroup> groups,
                                                         std::shared_ptr<Communicator> data_group);

}  // namespace fathom::parallel
