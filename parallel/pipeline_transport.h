#pragma once
// Blocking transfers of self-describing tensors between pipeline stages, for what runs outside
// the training schedule: an evaluation forward through the stages (engine/pipeline_executor.h)
// and gathering every stage's parameters onto the first (fathom-train's final model). Each tensor is preceded by
// a small header (dtype and shape, and for named tensors the name), so the receiver needs to
// know nothing in advance. The training schedule's transfers (engine/pipeline_executor.h) agree
// on shapes once per step instead.

#include <string>
#include <vector>

#include "nn/module.h"
#include "parallel/pipeline_module.h"

namespace fathom::parallel {

void send_tensor(Communicator& comm, const Tensor& tensor, int peer, int tag);
Tensor recv_tensor(Communicator& comm, int peer, int tag);
// Every rank's `text`, in rank order, on every rank (collective): the stages' checkpoint tables.
std::vector<std::string> all_gather_text(Communicator& comm, const std::string& text);

// Every stage's `tensors` (named as in the whole model) on the first stage, stage after stage (the
// whole model's order but for interleaved chunks), tied copies once; the other stages get an
// empty list. Collective over the pipeline group.
nn::NamedTensors gather_to_first_stage(const PipelineModule& module, const nn::NamedTensors& tensors);

}  // namespace fathom::parallel
