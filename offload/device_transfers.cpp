#include "offload/device_transfers.h"

#include "core/error.h"

namespace fathom::offload {

DeviceTransfers::DeviceTransfers(int device) : stream_(device) {}

DeviceTransfers::~DeviceTransfers() {
  try {
    stream_.synchronize();  // never leave a copy running into memory about to be freed
  } catch (const Error&) {
  }
}

void DeviceTransfers::enqueue(const Tensor& destination, const Tensor& source) {
  FATHOM_CHECK(destination.is_contiguous() && source.is_contiguous() && destination.dtype() == source.dtype() &&
                   destination.numel() == source.numel(),
               "DeviceTransfers: ", destination.str(), " and ", source.str(),
               " must be contiguous and of one dtype and size");
  cuda::copy_bytes_async(destination.raw_data(), destination.device(), source.raw_data(), source.device(),
                         static_cast<size_t>(source.numel()) * element_size(source.dtype()), stream_);
  in_flight_.push_back(destination);
  in_flight_.push_back(source);
  ++copies_;
}

void DeviceTransfers::to_host(const Tensor& host, const Tensor& device) {
  FATHOM_CHECK(host.device().is_cpu() && device.device().is_cuda(), "DeviceTransfers::to_host: ", host.str(),
               " must be on the host and ", device.str(), " on a GPU");
  cuda::Event produced;
  produced.record_on_current_stream();  // `device` is final once the compute stream gets here
  produced.wait_on(stream_);
  enqueue(host, device);
}

void DeviceTransfers::to_device(const Tensor& device, const Tensor& host) {
  FATHOM_CHECK(host.device().is_cpu() && device.device().is_cuda(), "DeviceTransfers::to_device: ", device.str(),
               " must be on a GPU and ", host.str(), " on the host");
  enqueue(device, host);
}

void DeviceTransfers::finish() {
  if (in_flight_.empty()) return;
  cuda::Event landed;
  landed.record(stream_);
  landed.wait_on_current_stream();
  landed.synchronize();
  in_flight_.clear();
}

}  // namespace fathom::offload
