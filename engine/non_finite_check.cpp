#include "engine/non_finite_check.h"

#include <sstream>

#include "kernels/optimizer_kernels.h"

namespace fathom {

std::string non_finite_step_message(int64_t step, double loss, double grad_norm, const nn::Module& model) {
  std::string first_bad;
  for (const auto& [name, param] : model.named_parameters()) {
    const Tensor& values = param.data();
    if (values.defined() && values.numel() > 0 && has_inf_or_nan({values})) {
      first_bad = name;
      break;
    }
  }
  std::ostringstream out;
  out << "step " << step << ": the loss is " << loss << " and the gradient norm " << grad_norm << "; ";
  if (!first_bad.empty())
    out << "parameter " << first_bad << " already holds NaN/Inf (weights loaded or initialised non-finite, or "
        << "an earlier step trained on with the check off)";
  else
    out << "every weight is finite, so this step's loss or gradients overflowed: training diverged, or the data "
           "or the loss function produce NaN/Inf";
  out << ". Nothing was updated: resume from the last good checkpoint with a lower lr or gradient clipping "
         "(\"gradient_clipping\": 1.0), or turn the check off (engine.set_stop_on_non_finite(false); "
         "fathom-train --allow-non-finite) to train on";
  return out.str();
}

}  // namespace fathom
