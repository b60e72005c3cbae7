#pragma once
// safetensors I/O: the tensor file format of the Hugging Face ecosystem, so weights move between
// Fathom and transformers / PyTorch / JAX without conversion scripts.
//
// Layout: an 8-byte little-endian u64 N, then N bytes of a JSON header, then the data section.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (byte
// offsets relative to the data section) plus an optional "__metadata__" string->string map.
//
// Reading maps the file into memory and checks the whole header before any tensor is handed out:
// a malformed or hostile file gives an error naming the file, the tensor and the offending
// offsets, never a crash or a read outside the file. See docs/nn_io.md.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace fathom::nn {

// The safetensors spelling of a dtype ("F32", "BF16", "BOOL", ...) and back. Fathom reads F32,
// F16, BF16, F64, I64, I32 and BOOL; other safetensors dtypes (U8, I8, F8_*, ...) are rejected
// with a message that says so.
const char* safetensors_dtype_name(DType dtype);
DType parse_safetensors_dtype(const std::string& name);  // throws naming the accepted names

// Writes `tensors` to `path` atomically: the bytes go to `path + ".tmp"`, are fsynced, and the
// file is renamed over `path`, so a crash leaves either the old file or the new one, never half
// of one. Tensors are sorted by name and laid out in that order; any layout (views,
// transposes, offsets) and any device is accepted (copied to contiguous CPU memory first).
// "__metadata__" always carries "format": "pt" (transformers refuses files without it),
// merged with `metadata` (whose entries win on a clash).
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A tensor written piece by piece, so that a file larger than memory can be written (a
// checkpoint's shard read from swap files, an export assembled tensor by tensor): its name, dtype
// and shape, and `read(begin, count)`, the flattened elements [begin, begin + count) in that
// dtype on any device, asked for in ascending order. `checksum`, when set, receives the XXH64
// (core/xxhash64.h) of the tensor's bytes as written.
struct StreamedTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::function<Tensor(int64_t begin, int64_t count)> read;
  uint64_t* checksum = nullptr;
};
// save_safetensors over streamed tensors, asking each for at most `chunk_bytes` at a time.
void save_safetensors_streamed(const std::string& path, std::vector<StreamedTensor> tensors,
                               const std::map<std::string, std::string>& metadata = {},
                               int64_t chunk_bytes = int64_t{64} << 20);

struct SafetensorsTensorInfo {
  DType dtype = DType::F32;
  Shape shape;
  uint64_t data_begin = 0;  // byte offsets relative to the start of the data section
  uint64_t data_end = 0;
};

// An open safetensors file, memory-mapped and validated once at construction.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& names() const { return names_; }  // sorted
  bool contains(const std::string& name) const { return infos_.count(name) != 0; }
  // Throws naming the file, the missing name, the nearest name and a few of those present.
  const SafetensorsTensorInfo& info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // File offset of the data section (8 + header length).
  uint64_t data_section_offset() const { return data_offset_; }

  // A CPU tensor over the mapped bytes when they are aligned for the dtype (no copy; the
  // mapping stays alive as long as any such tensor does), otherwise an owned copy.
  // The mapping is private copy-on-write: writing into a returned view changes this process's
  // copy, never the file.
  Tensor get(const std::string& name) const;
  // Always an owned copy (not tied to the mapping).
  Tensor get_copy(const std::string& name) const;

 private:
  const char* tensor_bytes(const std::string& name, const SafetensorsTensorInfo& info) const;

  std::string path_;
  std::shared_ptr<const MappedFile> mapping_;
  uint64_t data_offset_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, SafetensorsTensorInfo> infos_;
  std::map<std::string, std::string> metadata_;
};

// Reads every tensor of `path` into owned CPU tensors (the file is closed on return).
std::map<std::string, Tensor> load_safetensors(const std::string& path);

}  // namespace fathom::nn
