#include "models/gpt_tensor_parallel_inference.h"

#include "autograd/grad_mode.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "models/gpt_inference.h"
#include "parallel/tensor_parallel_regions.h"

namespace fathom::models {
namespace {

Tensor run(nn::Module& module, const Tensor& x) { return module(autograd::Variable(x)).data(); }

}  // namespace

TensorParallelGPTInference::TensorParallelGPTInference(TensorParallelGPT& model,
                                                       std::shared_ptr<parallel::Communicator> group, int64_t batch)
    : model_(model), group_(std::move(group)), batch_(batch), device_(model.device()) {
  FATHOM_CHECK(!model.options().sequence_parallel,
               "TensorParallelGPTInference: build the model without sequence "
               "parallelism for decoding (it feeds one position at a time)");
  const GPTConfig& c = model.config();
  const int64_t local_heads = c.n_head / group_->size(), HS = c.n_embd / c.n_head;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    keys_.push_back(Tensor::zeros({batch, local_heads, c.block_size, HS}, c.dtype, device_));
    values_.push_back(Tensor::zeros({batch, local_heads, c.block_size, HS}, c.dtype, device_));
  }
}

Tensor TensorParallelGPTInference::block_forward(size_t layer, const Tensor& x) {
  auto& block = static_cast<parallel::TensorParallelBlock&>((*model_.transformer->h)[layer]);
  const GPTConfig& c = model_.config();
  const int64_t B = x.size(0), n = x.size(1), NH = block.attn->local_heads, HS = c.n_embd / c.n_head;
  const int64_t width = NH * HS;
  // This rank's heads: q, k and v of them, part after part ([B, n, 3 width]).
  const Tensor qkv = run(*block.attn->c_attn, run(*block.ln_1, x));
  auto heads = [&](int64_t part) {  // [B, n, width] -> [B, NH, n, HS]
    return qkv.narrow(2, part * width, width).reshape({B, n, NH, HS}).permute({0, 2, 1, 3});
  };
  const Tensor attended = cached_attention(heads(0), heads(1), heads(2), keys_[layer], values_[layer], position_);
  const Tensor merged = attended.permute({0, 2, 1, 3}).contiguous().reshape({B, n, width});
  const Tensor h = add(x, run(*block.attn->c_proj, merged));  // row-parallel: summed over the group
  return add(h, run(*block.mlp, run(*block.ln_2, h)));
}

Tensor TensorParallelGPTInference::feed(const Tensor& tokens) {
  autograd::NoGradGuard no_grad;
  const GPTConfig& c = model_.config();
  FATHOM_CHECK(tokens.dim() == 2 && tokens.size(0) == batch_ && tokens.dtype() == DType::I64,
               "TensorParallelGPTInference.feed: expected i64 tokens [", batch_, ", n], got ", tokens.str());
  const int64_t n = tokens.size(1);
  FATHOM_CHECK(n >= 1 && position_ + n <= c.block_size, "TensorParallelGPTInference.feed: ", position_ + n,
               " positions exceed the model's block_size ", c.block_size, " (start a new sequence with reset())");
  TensorParallelGPT::Transformer& t = *model_.transformer;
  const Tensor positions = add(Tensor::arange(n, DType::I64, device_), static_cast<double>(position_));
  Tensor x = add(run(*t.wte, tokens.to(device_)), run(*t.wpe, positions));
  for (size_t l = 0; l < keys_.size(); ++l) x = block_forward(l, x);
  position_ += n;
  const Tensor last = run(*t.ln_f, x.narrow(1, n - 1, 1)).reshape({batch_, c.n_embd});
  // This rank's vocabulary rows, gathered: [B, padded vocabulary]; the padding is never drawn.
  const Tensor mine = matmul(last, t.wte->weight.data(), false, /*transpose_b=*/true);
  const Tensor all = parallel::gather_along(mine, -1, t.wte->padded_num_embeddings, *group_);
  return all.narrow(1, 0, c.vocab_size).contiguous().to(DType::F32);
}

}  // namespace fathom::models
