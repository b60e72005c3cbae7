#include "core/storage.h"

#include "core/allocator.h"
#include "core/error.h"

namespace fathom {

Storage::Storage(size_t nbytes, Device device, MemoryTag tag)
    : nbytes_(nbytes), device_(device), allocator_(&allocator_for_new(device)), tag_(tag) {
  data_ = allocator_->allocate(nbytes, tag);
}

std::shared_ptr<Storage> Storage::wrap_external(void* data, size_t nbytes, Device device,
                                                std::function<void(void*)> deleter) {
  std::shared_ptr<Storage> storage(new Storage());
  storage->data_ = data;
  storage->nbytes_ = nbytes;
  storage->device_ = device;
  storage->external_deleter_ = deleter ? std::move(deleter) : [](void*) {};
  return storage;
}

Storage::~Storage() {
  if (external_deleter_) {
    external_deleter_(data_);
  } else if (data_ != nullptr) {
    allocator_->deallocate(data_, nbytes_, tag_);
  }
}

void* Storage::data() const {
  FATHOM_CHECK(!is_released(), "storage of ", nbytes_, " bytes on ", device_.str(),
               " is released (ZeRO-3 partitioned parameter?): refill() it before reading or writing");
  return data_;
}

void Storage::retag(MemoryTag tag) {
  if (tag == tag_) return;
  if (!external_deleter_ && data_ != nullptr) allocator_->retag(nbytes_, tag_, tag);
  tag_ = tag;
}

void Storage::release() {
  FATHOM_CHECK(!external_deleter_, "cannot release externally owned memory (e.g. a memory-mapped file)");
  if (data_ == nullptr) return;
  allocator_->deallocate(data_, nbytes_, tag_);
  data_ = nullptr;
}

void Storage::refill() {
  if (data_ != nullptr || nbytes_ == 0) return;
  data_ = allocator_->allocate(nbytes_, tag_);
}

}  // namespace fathom
