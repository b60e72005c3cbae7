#pragma once
// Where a tensor's memory lives: the host (CPU) or CUDA device n.

#include <string>

namespace fathom {

enum class DeviceType : unsigned char { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // CUDA ordinal; always 0 for the CPU

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::CPU ? 0 : i) {}
  static constexpr Device cpu() { return Device(DeviceType::CPU); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }
  // "cpu", "cuda", "cuda:1"; throws naming the accepted forms.
  static Device parse(const std::string& text);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu" or "cuda:1"
  friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr Device kCPU = Device::cpu();

}  // namespace fathom
