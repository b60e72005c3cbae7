#include "offload/tensor_swapper.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/storage.h"
#include "offload/direct_file.h"
#include "offload/host_memory.h"
#include "offload/swap_file.h"

namespace fathom::offload {
namespace {

// The tensor's memory as one I/O span: its whole (page-padded) host-tier block.
SwapSpan span_of(const Tensor& tensor) {
  const Storage& storage = *tensor.storage();
  FATHOM_CHECK(storage.allocator() == &host_tier_allocator(false) || storage.allocator() == &host_tier_allocator(true),
               "TensorSwapper: a swapped tensor must live in the host tier (offload/host_memory.h), whose blocks are "
               "O_DIRECT buffers");
  FATHOM_CHECK(tensor.is_contiguous() && tensor.raw_data() == storage.data(),
               "TensorSwapper: a swapped tensor must be contiguous and start its storage");
  const auto bytes = static_cast<int64_t>(storage.nbytes());
  return {storage.data(), bytes, DirectFile::round_up(bytes, static_cast<int64_t>(kHostTierAlignment))};
}

std::vector<SwapSpan> spans_of(const std::vector<Tensor>& tensors) {
  std::vector<SwapSpan> spans;
  for (const Tensor& t : tensors) spans.push_back(span_of(t));
  return spans;
}

}  // namespace

struct TensorSwapper::Group {
  SwapFile file;
  std::vector<Tensor> in_flight;  // kept alive until the I/O finishes
  enum class Io { None, Out, In } io = Io::None;
  bool holds_state = false;
};

TensorSwapper::TensorSwapper(std::string directory, AioOptions aio, IoBackend backend, const std::string& path_key)
    : directory_(std::move(directory)), engine_(aio, backend) {
  namespace fs = std::filesystem;
  for (fs::path p = fs::path(directory_).lexically_normal(); !p.empty() && !fs::exists(p); p = p.parent_path())
    created_.insert(created_.begin(), p.string());
  std::error_code error;
  fs::create_directories(directory_, error);
  FATHOM_CHECK(!error, "offload: cannot create the swap directory \"", directory_, "\": ", error.message(),
               "; set ", path_key, " to a writable directory on a local disk");
}

TensorSwapper::~TensorSwapper() {
  for (const auto& g : groups_) {
    try {
      if (g->io == Group::Io::Out) g->file.finish_write();
      if (g->io == Group::Io::In) g->file.finish_read();
    } catch (const Error&) {
      // Unwinding from an earlier error: the files are scratch and go below.
    }
  }
  const std::vector<std::string> paths = [&] {
    std::vector<std::string> p;
    for (const auto& g : groups_) p.push_back(g->file.path());
    return p;
  }();
  groups_.clear();
  std::error_code ignored;
  for (const std::string& path : paths) std::filesystem::remove(path, ignored);
  // Innermost first; a directory another job's files still use is not empty and stays.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) std::filesystem::remove(*it, ignored);
}

size_t TensorSwapper::add_group() {
  const size_t id = groups_.size();
  groups_.push_back(std::make_unique<Group>(
      Group{SwapFile(engine_, directory_ + "/group" + std::to_string(id) + ".swp"), {}, Group::Io::None, false}));
  FATHOM_CHECK(groups_.back()->file.alignment() <= static_cast<int64_t>(kHostTierAlignment),
               "offload: direct I/O on \"", directory_, "\" needs ", groups_.back()->file.alignment(),
               "-byte alignment, more than the host tier's ", kHostTierAlignment,
               "-byte blocks; use a file system "
               "with 4 KiB sectors or smaller");
  return id;
}

TensorSwapper::Group& TensorSwapper::group(size_t id) const {
  FATHOM_CHECK(id < groups_.size(), "TensorSwapper: no group ", id);
  return *groups_[id];
}

void TensorSwapper::begin_swap_out(size_t id, std::vector<Tensor> tensors) {
  Group& g = group(id);
  FATHOM_CHECK(g.io == Group::Io::None, "TensorSwapper: group ", id, " is already being swapped");
  g.file.begin_write(spans_of(tensors));
  g.in_flight = std::move(tensors);
  g.io = Group::Io::Out;
}

void TensorSwapper::finish_swap_out(size_t id) {
  Group& g = group(id);
  FATHOM_CHECK(g.io == Group::Io::Out, "TensorSwapper: group ", id, " is not being swapped out");
  g.io = Group::Io::None;
  g.file.finish_write();
  for (const Tensor& t : g.in_flight) t.storage()->release();
  g.in_flight.clear();
  g.holds_state = true;
}

void TensorSwapper::begin_swap_in(size_t id, std::vector<Tensor> tensors) {
  Group& g = group(id);
  FATHOM_CHECK(g.io == Group::Io::None, "TensorSwapper: group ", id, " is already being swapped");
  FATHOM_CHECK(g.holds_state, "TensorSwapper: group ", id, " was never swapped out");
  for (const Tensor& t : tensors) t.storage()->refill();
  g.file.begin_read(spans_of(tensors));
  g.in_flight = std::move(tensors);
  g.io = Group::Io::In;
}

void TensorSwapper::finish_swap_in(size_t id) {
  Group& g = group(id);
  FATHOM_CHECK(g.io == Group::Io::In, "TensorSwapper: group ", id, " is not being swapped in");
  g.io = Group::Io::None;
  const std::vector<Tensor> landing = std::move(g.in_flight);  // alive until the reads have landed
  g.in_flight.clear();
  g.file.finish_read();
}

bool TensorSwapper::holds_state(size_t id) const { return group(id).holds_state; }

}  // namespace fathom::offload
