// safetensors reading: the header is validated in full when the file is opened (the same rules as
// the reference Rust implementation, plus a few stricter ones), so get() only ever touches bytes
// that were proven to lie inside the file. Writing lives in safetensors_save.cpp.

#include "nn/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "core/mapped_file.h"
#include "core/did_you_mean.h"
#include "core/json.h"

namespace fathom::nn {

// safetensors data is little-endian; a big-endian host would need a byte swap on every access.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// A header larger than this is corruption (a 70B-parameter model's header is a few MB); the
// reference implementation uses the same bound.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kSupported[] = {{"F32", DType::F32},   {"F16", DType::F16}, {"BF16", DType::BF16},
                                    {"F64", DType::F64},   {"I64", DType::I64}, {"I32", DType::I32},
                                    {"BOOL", DType::Bool}};
// Valid safetensors dtypes that Fathom has no tensor type for: named separately so the error
// says "not supported" rather than "unknown".
constexpr const char* kKnownUnsupported[] = {"U8",       "I8",       "U16",      "I16",      "U32",     "U64",
                                             "F8_E4M3",  "F8_E5M2",  "F8_E4M3FNUZ", "F8_E5M2FNUZ",
                                             "F8_E8M0",  "F6_E2M3",  "F6_E3M2",  "F4",        "C64"};
constexpr const char* kSupportedList = "F32, F16, BF16, F64, I64, I32, BOOL";

std::string offsets_str(uint64_t begin, uint64_t end) {
  std::string text = "[";
  text += std::to_string(begin);
  text += ", ";
  text += std::to_string(end);
  text += ']';
  return text;
}

// A non-negative JSON integer, or an error naming the tensor and the field.
uint64_t header_uint(const JsonValue& value, const std::string& where, const std::string& tensor,
                     const char* field) {
  FATHOM_CHECK(value.is_integer() && value.as_int64() >= 0, where, "tensor '", tensor, "': ", field,
               " must hold non-negative integers, found ",
               value.is_number() ? value.number_text() : std::string(json_kind_name(value.kind())),
               " at file byte ", value.offset());
  return static_cast<uint64_t>(value.as_int64());
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeName& entry : kSupported)
    if (entry.dtype == dtype) return entry.name;
  FATHOM_FAIL("dtype ", dtype_name(dtype), " has no safetensors name");
}

DType parse_safetensors_dtype(const std::string& name) {
  for (const DTypeName& entry : kSupported)
    if (name == entry.name) return entry.dtype;
  for (const char* known : kKnownUnsupported)
    FATHOM_CHECK(name != known, "safetensors dtype \"", name, "\" is valid but Fathom has no such tensor type (it reads ",
                 kSupportedList, "); convert the tensor before saving it");
  FATHOM_FAIL("unknown safetensors dtype \"", name, "\" (Fathom reads ", kSupportedList, ")");
}

// The whole file, mapped private and copy-on-write: writable so a tensor viewing it behaves
// like any other tensor (writing through it cannot fault), private so the file never changes.
SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const std::string where = "safetensors file '" + path + "': ";

  mapping_ = MappedFile::open(path, MappedFile::Access::PrivateWritable, "safetensors file");
  const uint64_t file_size = mapping_->size();
  FATHOM_CHECK(file_size >= 8, where, "file is ", file_size,
               " bytes, shorter than the 8-byte header length that starts every safetensors file "
               "(truncated, or not a safetensors file)");
  const char* base = reinterpret_cast<const char*>(mapping_->data());

  uint64_t header_size = 0;
  std::memcpy(&header_size, base, 8);
  FATHOM_CHECK(header_size <= kMaxHeaderBytes, where, "header length ", header_size, " is larger than the ",
               kMaxHeaderBytes, "-byte limit (corrupted, or not a safetensors file)");
  FATHOM_CHECK(8 + header_size <= file_size, where, "header length ", header_size,
               " runs past the end of the file (the header would end at byte ", 8 + header_size, " but the file is ",
               file_size, " bytes); the file is truncated");
  data_offset_ = 8 + header_size;
  const uint64_t data_size = file_size - data_offset_;

  const JsonValue header = parse_json(std::string_view(base + 8, header_size),
                                         "safetensors header of '" + path + "'", 8);
  FATHOM_CHECK(header.is_object(), where, "header is ", json_kind_name(header.kind()),
               ", expected a JSON object mapping tensor names to {dtype, shape, data_offsets}");

  for (const auto& [name, entry] : header.as_object()) {
    if (name == "__metadata__") {
      FATHOM_CHECK(entry.is_object(), where, "__metadata__ is ", json_kind_name(entry.kind()),
                   ", expected an object mapping strings to strings");
      for (const auto& [key, value] : entry.as_object()) {
        FATHOM_CHECK(value.is_string(), where, "__metadata__ value of \"", key, "\" is ",
                     json_kind_name(value.kind()), "; safetensors metadata maps strings to strings");
        metadata_[key] = value.as_string();
      }
      continue;
    }
    const std::string tensor = "tensor '" + name + "'";
    FATHOM_CHECK(entry.is_object(), where, tensor, " is described by ", json_kind_name(entry.kind()),
                 ", expected an object {dtype, shape, data_offsets}");
    // Extra fields are ignored, as the reference implementation does.
    for (const char* field : {"dtype", "shape", "data_offsets"})
      FATHOM_CHECK(entry.find(field) != nullptr, where, tensor, " has no \"", field, "\" field");

    SafetensorsTensorInfo info;
    const JsonValue& dtype = entry.at("dtype");
    FATHOM_CHECK(dtype.is_string(), where, tensor, ": dtype is ", json_kind_name(dtype.kind()), ", expected a string");
    try {
      info.dtype = parse_safetensors_dtype(dtype.as_string());
    } catch (const Error& error) {
      FATHOM_FAIL(where, tensor, ": ", error.message());
    }

    const JsonValue& shape = entry.at("shape");
    FATHOM_CHECK(shape.is_array(), where, tensor, ": shape is ", json_kind_name(shape.kind()),
                 ", expected an array of non-negative integers");
    for (const JsonValue& dim : shape.as_array())
      info.shape.push_back(static_cast<int64_t>(header_uint(dim, where, name, "shape")));
    const JsonValue& offsets = entry.at("data_offsets");
    FATHOM_CHECK(offsets.is_array() && offsets.as_array().size() == 2, where, tensor,
                 ": data_offsets must be an array [begin, end] of two integers");
    info.data_begin = header_uint(offsets.as_array()[0], where, name, "data_offsets");
    info.data_end = header_uint(offsets.as_array()[1], where, name, "data_offsets");
    const std::string offsets_text = offsets_str(info.data_begin, info.data_end);
    FATHOM_CHECK(info.data_begin <= info.data_end, where, tensor, ": data_offsets ", offsets_text,
                 " are reversed (begin > end)");
    FATHOM_CHECK(info.data_end <= data_size, where, tensor, ": data_offsets ", offsets_text,
                 " run past the end of the data section (", data_size, " bytes, starting at file byte ", data_offset_,
                 "); the file is truncated or the header is wrong");

    // The byte count the shape implies, saturated at 2^64 so a hostile shape cannot overflow it.
    constexpr unsigned __int128 kSaturated = static_cast<unsigned __int128>(1) << 64;
    unsigned __int128 nbytes = element_size(info.dtype);
    for (const int64_t size : info.shape) nbytes = std::min(nbytes * static_cast<uint64_t>(size), kSaturated);
    const uint64_t span = info.data_end - info.data_begin;
    FATHOM_CHECK(nbytes == span, where, tensor, " (", safetensors_dtype_name(info.dtype), ", shape ",
                 shape_str(info.shape), ") needs ",
                 nbytes == kSaturated ? std::string("at least 2^64") : std::to_string(static_cast<uint64_t>(nbytes)),
                 " bytes but its data_offsets ", offsets_text, " span ", span, " bytes; the header is inconsistent");
    names_.push_back(name);
    infos_.emplace(name, std::move(info));
  }
  std::sort(names_.begin(), names_.end());

  // Two tensors sharing bytes would alias silently; the reference implementation rejects it too.
  // (Gaps between tensors are tolerated: they cost nothing to skip.)
  std::vector<const std::string*> by_offset;
  for (const std::string& name : names_)
    if (infos_.at(name).data_end > infos_.at(name).data_begin) by_offset.push_back(&name);
  std::sort(by_offset.begin(), by_offset.end(), [&](const std::string* a, const std::string* b) {
    return infos_.at(*a).data_begin < infos_.at(*b).data_begin;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsTensorInfo& previous = infos_.at(*by_offset[i - 1]);
    const SafetensorsTensorInfo& current = infos_.at(*by_offset[i]);
    FATHOM_CHECK(current.data_begin >= previous.data_end, where, "tensors '", *by_offset[i - 1], "' (data_offsets ",
                 offsets_str(previous.data_begin, previous.data_end), ") and '", *by_offset[i], "' (data_offsets ",
                 offsets_str(current.data_begin, current.data_end),
                 ") overlap; each tensor needs its own bytes (the file is corrupted)");
  }
}

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = infos_.find(name);
  if (it != infos_.end()) return it->second;
  std::string listing;
  const size_t shown = std::min<size_t>(names_.size(), 5);
  for (size_t i = 0; i < shown; ++i) {
    listing += i ? ", '" : "'";
    listing += names_[i];
    listing += '\'';
  }
  if (names_.size() > shown) listing += ", ...";
  FATHOM_FAIL("safetensors file '", path_, "' has no tensor '", name, "'", did_you_mean(name, names_), "; it holds ",
              names_.size(), " tensor", names_.size() == 1 ? "" : "s", names_.empty() ? "" : ": ", listing);
}

const char* SafetensorsFile::tensor_bytes(const std::string& name, const SafetensorsTensorInfo& info) const {
  const char* bytes = reinterpret_cast<const char*>(mapping_->private_data()) + data_offset_ + info.data_begin;
  // A bool element is one byte that must be 0 or 1: any other value is undefined behaviour
  // once read as a C++ bool, so it is rejected here rather than trusted.
  if (info.dtype == DType::Bool) {
    for (uint64_t i = 0; i < info.data_end - info.data_begin; ++i)
      FATHOM_CHECK(static_cast<unsigned char>(bytes[i]) <= 1, "safetensors file '", path_, "': BOOL tensor '", name,
                   "' holds byte value ", static_cast<int>(static_cast<unsigned char>(bytes[i])), " at file byte ",
                   data_offset_ + info.data_begin + i, "; BOOL elements must be 0 or 1");
  }
  return bytes;
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const SafetensorsTensorInfo& meta = info(name);
  const char* bytes = tensor_bytes(name, meta);
  const size_t nbytes = meta.data_end - meta.data_begin;
  // An empty tensor, or data a typed load could not read in place: own a copy instead.
  if (nbytes == 0 || reinterpret_cast<uintptr_t>(bytes) % element_size(meta.dtype) != 0) return get_copy(name);
  std::shared_ptr<const MappedFile> keep_alive = mapping_;
  auto storage = Storage::wrap_external(const_cast<char*>(bytes), nbytes, kCPU,
                                        [keep_alive](void*) mutable { keep_alive.reset(); });
  return Tensor(std::move(storage), meta.shape, contiguous_strides(meta.shape), 0, meta.dtype);
}

Tensor SafetensorsFile::get_copy(const std::string& name) const {
  const SafetensorsTensorInfo& meta = info(name);
  const char* bytes = tensor_bytes(name, meta);
  Tensor out = Tensor::empty(meta.shape, meta.dtype, kCPU);
  const size_t nbytes = meta.data_end - meta.data_begin;
  if (nbytes > 0) std::memcpy(out.raw_data(), bytes, nbytes);
  return out;
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  const SafetensorsFile file(path);
  std::map<std::string, Tensor> tensors;
  for (const std::string& name : file.names()) tensors.emplace(name, file.get_copy(name));
  return tensors;
}

}  // namespace fathom::nn
