#include "parallel/pipeline_transport.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace fathom::parallel {
namespace {

constexpr int64_t kMaxDims = 8;

// [dtype, ndim, dims...], as i64 words.
Tensor describe(const Tensor& t) {
  FATHOM_CHECK(t.dim() <= kMaxDims, "pipeline transfer: tensors of at most ", kMaxDims, " dimensions, got ",
               shape_str(t.sizes()));
  std::vector<int64_t> words(2 + kMaxDims, 0);
  words[0] = static_cast<int64_t>(t.dtype());
  words[1] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) words[2 + d] = t.size(d);
  return Tensor::from_vector(words, {2 + kMaxDims});
}

Tensor text_tensor(const std::string& text) {
  std::vector<int64_t> codes(text.begin(), text.end());
  return Tensor::from_vector(codes, {static_cast<int64_t>(codes.size())});
}

std::string text_of(const Tensor& t) {
  std::string text;
  for (const int64_t c : t.to_vector<int64_t>()) text.push_back(static_cast<char>(c));
  return text;
}

}  // namespace

void send_tensor(Communicator& comm, const Tensor& tensor, int peer, int tag) {
  const Tensor host = tensor.to(kCPU).contiguous();
  comm.send(describe(host), peer, tag);
  if (host.numel() > 0) comm.send(host, peer, tag);
}

Tensor recv_tensor(Communicator& comm, int peer, int tag) {
  Tensor header = Tensor::empty({2 + kMaxDims}, DType::I64);
  comm.recv(header, peer, tag);
  const std::vector<int64_t> words = header.to_vector<int64_t>();
  Tensor out = Tensor::empty(Shape(words.begin() + 2, words.begin() + 2 + words[1]), static_cast<DType>(words[0]));
  if (out.numel() > 0) comm.recv(out, peer, tag);
  return out;
}

std::vector<std::string> all_gather_text(Communicator& comm, const std::string& text) {
  Tensor lengths = Tensor::empty({comm.size()}, DType::I64);
  comm.all_gather(Tensor::from_vector<int64_t>({static_cast<int64_t>(text.size())}), lengths);
  const std::vector<int64_t> counts = lengths.to_vector<int64_t>();
  int64_t total = 0;
  for (const int64_t n : counts) total += n;
  Tensor all = Tensor::empty({total}, DType::I64);
  comm.all_gather_v(text_tensor(text), all, counts);
  const std::string joined = text_of(all);
  std::vector<std::string> texts;
  for (int64_t begin = 0, r = 0; r < comm.size(); begin += counts[r++]) texts.push_back(joined.substr(begin, counts[r]));
  return texts;
}

nn::NamedTensors gather_to_first_stage(const PipelineModule& module, const nn::NamedTensors& tensors) {
  Communicator& pipeline = module.groups().pipeline();
  constexpr int kTag = 11;
  if (pipeline.rank() > 0) {
    pipeline.send(Tensor::from_vector<int64_t>({static_cast<int64_t>(tensors.size())}), 0, kTag);
    for (const auto& [name, tensor] : tensors) {
      send_tensor(pipeline, text_tensor(name), 0, kTag);
      send_tensor(pipeline, tensor, 0, kTag);
    }
    return {};
  }
  nn::NamedTensors whole = tensors;
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) names.insert(name);
  for (int stage = 1; stage < pipeline.size(); ++stage) {
    Tensor count = Tensor::empty({1}, DType::I64);
    pipeline.recv(count, stage, kTag);
    for (int64_t k = 0; k < count.to_vector<int64_t>()[0]; ++k) {
      std::string name = text_of(recv_tensor(pipeline, stage, kTag));
      Tensor tensor = recv_tensor(pipeline, stage, kTag);
      if (names.insert(name).second) whole.emplace_back(std::move(name), std::move(tensor));  // a tied copy: once
    }
  }
  return whole;
}

}  // namespace fathom::parallel
