// safetensors: bit-exact round trips, the exact byte layout Fathom writes, the mmap view/copy
// choice, and every malformed-file case with its message.

#include <unistd.h>

#include <catch2/catch.hpp>

#include "test_util.h"
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/xxhash64.h"
#include "nn/safetensors.h"

using namespace fathom;
using namespace fathom::nn;

using fathom::testing::error_of;

namespace {

// A fresh directory per test case, removed afterwards.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("fathom_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file from a header text and a data section, written by hand (no padding added).
std::string make_file(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

// The raw bytes of a contiguous CPU tensor, for bit-exact comparison.
std::string raw(const Tensor& tensor) {
  const Tensor c = tensor.contiguous();
  if (c.nbytes() == 0) return "";
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

// Distinct bit patterns in every byte, including NaN payloads and negative zeros for floats.
Tensor pattern(const Shape& shape, DType dtype, uint8_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* bytes = static_cast<uint8_t*>(t.numel() ? t.raw_data() : nullptr);
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(seed + 37 * i + (i >> 3));
  if (dtype == DType::Bool)
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] &= 1;
  return t;
}

}  // namespace

TEST_CASE("safetensors round trip is bit-exact for every dtype and layout", "[nn][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const Tensor matrix = pattern({5, 7}, DType::F32, 3);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", pattern({3, 4}, DType::F32, 1)},
      {"f16", pattern({5}, DType::F16, 2)},
      {"bf16", pattern({2, 3, 2}, DType::BF16, 3)},
      {"i64", pattern({4}, DType::I64, 4)},
      {"f64", pattern({2, 2}, DType::F64, 5)},
      {"i32", pattern({3}, DType::I32, 6)},
      {"bool", pattern({6}, DType::Bool, 7)},
      {"scalar", pattern({}, DType::F32, 8)},
      {"empty", pattern({0, 3}, DType::F32, 9)},
      {"transposed", matrix.t()},
      {"strided", matrix.slice(1, 1, 7, 2)},
      {"offset_view", matrix.select(0, 3)},
  };
  save_safetensors(path, tensors);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

  const auto loaded = load_safetensors(path);
  REQUIRE(loaded.size() == tensors.size());
  for (const auto& [name, original] : tensors) {
    INFO("tensor " << name);
    const Tensor& back = loaded.at(name);
    CHECK(back.dtype() == original.dtype());
    CHECK(back.sizes() == original.sizes());
    CHECK(raw(back) == raw(original));
  }

  const SafetensorsFile file(path);
  for (const auto& [name, original] : tensors) {
    INFO("tensor " << name);
    const Tensor view = file.get(name);
    CHECK(view.sizes() == original.sizes());
    CHECK(raw(view) == raw(original));
  }
  CHECK(file.info("transposed").shape == Shape{7, 5});
  CHECK(file.info("scalar").shape.empty());
}

TEST_CASE("safetensors metadata round trips and always carries format=pt", "[nn][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("meta.safetensors");
  save_safetensors(path, {{"w", Tensor::ones({2})}}, {{"step", "1200"}, {"note", "quote \" and\nnewline"}});
  const SafetensorsFile file(path);
  CHECK(file.metadata() ==
        std::map<std::string, std::string>{{"format", "pt"}, {"note", "quote \" and\nnewline"}, {"step", "1200"}});

  save_safetensors(path, {{"w", Tensor::ones({2})}});  // overwrites atomically
  CHECK(SafetensorsFile(path).metadata() == std::map<std::string, std::string>{{"format", "pt"}});
}

TEST_CASE("safetensors files written by Fathom have the exact reference layout", "[nn][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("layout.safetensors");
  // Given out of order: the file must list them sorted by name, data in that order.
  save_safetensors(path, {{"b", Tensor::from_vector<float>({1, 2, 3})},
                          {"a", Tensor::from_vector<int64_t>({7}, {1})},
                          {"c", Tensor::zeros({0}, DType::BF16)}});
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string expected_header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]},"c":{"dtype":"BF16","shape":[0],"data_offsets":[20,20]}})";
  REQUIRE(n % 8 == 0);
  REQUIRE(n >= expected_header.size());
  CHECK(n - expected_header.size() < 8);
  CHECK(bytes.substr(8, expected_header.size()) == expected_header);
  CHECK(bytes.substr(8 + expected_header.size(), n - expected_header.size()) ==
        std::string(n - expected_header.size(), ' '));
  REQUIRE(bytes.size() == 8 + n + 20);
  int64_t a = 0;
  float b[3];
  std::memcpy(&a, bytes.data() + 8 + n, 8);
  std::memcpy(b, bytes.data() + 8 + n + 8, 12);
  CHECK(a == 7);
  CHECK((b[0] == 1 && b[1] == 2 && b[2] == 3));
  // And the header is valid JSON for any reader.
  CHECK(parse_json(bytes.substr(8, n)).is_object());
}

TEST_CASE("safetensors get() views aligned data and copies unaligned data", "[nn][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("unaligned.safetensors");
  // One f16 element first puts the f32 tensor at data offset 2: misaligned for a 4-byte type.
  std::string header = R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},)"
                       R"("x":{"dtype":"F32","shape":[2],"data_offsets":[2,10]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data(10, '\0');
  const uint16_t h = 0x3c00;  // 1.0 in f16
  const float x[2] = {1.5f, -2.25f};
  std::memcpy(data.data(), &h, 2);
  std::memcpy(data.data() + 2, x, 8);
  write_bytes(path, make_file(header, data));

  const SafetensorsFile file(path);
  const Tensor h1 = file.get("h"), h2 = file.get("h");
  CHECK(h1.raw_data() == h2.raw_data());  // both view the mapping
  CHECK(h1.to_vector<float>() == std::vector<float>{1.0f});
  const Tensor x1 = file.get("x"), x2 = file.get("x");
  CHECK(x1.raw_data() != x2.raw_data());  // copies
  CHECK(reinterpret_cast<uintptr_t>(x1.raw_data()) % 4 == 0);
  CHECK(x1.to_vector<float>() == std::vector<float>{1.5f, -2.25f});
  // get_copy never aliases the mapping.
  CHECK(file.get_copy("h").raw_data() != h1.raw_data());

  // A view outlives the file object, and writing through it changes neither the file nor others.
  Tensor survivor;
  {
    const SafetensorsFile scoped(path);
    survivor = scoped.get("h");
  }
  survivor.fill_(3.0);
  CHECK(survivor.to_vector<float>() == std::vector<float>{3.0f});
  CHECK(SafetensorsFile(path).get("h").to_vector<float>() == std::vector<float>{1.0f});
}

TEST_CASE("safetensors save accepts any device and rejects bad tensor lists", "[nn][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  CHECK(error_of([&] { save_safetensors(path, {{"w", Tensor::ones({1})}, {"w", Tensor::ones({2})}}); }) ==
        "save_safetensors('" + path + "'): tensor name 'w' appears twice; names must be unique");
  CHECK(error_of([&] { save_safetensors(path, {{"__metadata__", Tensor::ones({1})}}); }) ==
        "save_safetensors('" + path + "'): \"__metadata__\" is reserved for the metadata map; rename the tensor");
  CHECK(error_of([&] { save_safetensors(path, {{"w", Tensor()}}); }) ==
        "save_safetensors('" + path + "'): tensor 'w' is undefined");
  CHECK_FALSE(std::filesystem::exists(path));
  const std::string missing_dir = dir.file("no/such/dir/x.safetensors");
  CHECK(error_of([&] { save_safetensors(missing_dir, {{"w", Tensor::ones({1})}}); })
            .rfind("save_safetensors: cannot create '" + missing_dir + ".tmp': No such file or directory", 0) == 0);
}

TEST_CASE("safetensors streamed in parts is the same file, with each tensor's checksum", "[nn][safetensors]") {
  TempDir dir;
  const std::vector<std::pair<std::string, Tensor>> tensors{
      {"b", pattern({7}, DType::BF16, 3)}, {"a", pattern({3, 5}, DType::F32, 1)}, {"c", pattern({0}, DType::F32, 2)}};
  save_safetensors(dir.file("whole.safetensors"), tensors, {{"k", "v"}});
  std::vector<uint64_t> sums(tensors.size(), 0);
  std::vector<StreamedTensor> streamed;
  std::vector<std::pair<int64_t, int64_t>> asked;  // (begin, count) of every part asked for
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor flat = tensors[i].second.view({-1});
    streamed.push_back({tensors[i].first, flat.dtype(), tensors[i].second.sizes(),
                        [flat, &asked](int64_t begin, int64_t count) {
                          asked.emplace_back(begin, count);
                          return flat.narrow(0, begin, count);
                        },
                        &sums[i]});
  }
  save_safetensors_streamed(dir.file("parts.safetensors"), streamed, {{"k", "v"}}, /*chunk_bytes=*/12);
  CHECK(read_bytes(dir.file("parts.safetensors")) == read_bytes(dir.file("whole.safetensors")));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string bytes = raw(tensors[i].second);
    CHECK(sums[i] == xxhash64(bytes.data(), bytes.size()));
  }
  // "a" (15 f32) in parts of 3 elements, "b" (7 bf16) of 6, in ascending order; "c" has none.
  const std::vector<std::pair<int64_t, int64_t>> expected{{0, 3}, {3, 3}, {6, 3}, {9, 3}, {12, 3}, {0, 6}, {6, 1}};
  CHECK(asked == expected);

  // A source that gives the wrong part: an error naming it, and no file.
  const std::string bad = dir.file("bad.safetensors");
  const Tensor two = Tensor::ones({2});
  CHECK(error_of([&] {
          save_safetensors_streamed(bad, {{"w", DType::F32, {3}, [two](int64_t, int64_t) { return two; }}});
        }) == "save_safetensors('" + bad + "'): tensor 'w' gave 2 f32 elements at 0 where 3 f32 were asked for");
  CHECK_FALSE(std::filesystem::exists(bad));
  CHECK_FALSE(std::filesystem::exists(bad + ".tmp"));
}

TEST_CASE("safetensors reports every malformed file clearly", "[nn][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("broken.safetensors");
  const std::string where = "safetensors file '" + path + "': ";
  auto open_error = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    return error_of([&] { SafetensorsFile file(path); });
  };
  const std::string f32x2 = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

  SECTION("missing file") {
    CHECK(error_of([&] { SafetensorsFile file(dir.file("absent")); }) ==
          "safetensors file '" + dir.file("absent") + "': cannot open: No such file or directory");
  }
  SECTION("shorter than 8 bytes") {
    CHECK(open_error("abc") == where +
                                   "file is 3 bytes, shorter than the 8-byte header length that starts every "
                                   "safetensors file (truncated, or not a safetensors file)");
  }
  SECTION("absurd header length") {
    std::string bytes(16, '\0');
    const uint64_t n = 5'000'000'000ull;
    std::memcpy(bytes.data(), &n, 8);
    CHECK(open_error(bytes) == where +
                                   "header length 5000000000 is larger than the 100000000-byte limit "
                                   "(corrupted, or not a safetensors file)");
  }
  SECTION("header length beyond the file") {
    std::string bytes = make_file(f32x2, std::string(8, '\0'));
    const uint64_t n = 1000;
    std::memcpy(bytes.data(), &n, 8);
    CHECK(open_error(bytes) == where + "header length 1000 runs past the end of the file (the header would end at "
                                       "byte 1008 but the file is " +
                                   std::to_string(bytes.size()) + " bytes); the file is truncated");
  }
  SECTION("header not JSON") {
    CHECK(open_error(make_file(R"({"x": {"dtype": "F32",})", "")) ==
          "safetensors header of '" + path + "': invalid JSON at byte 30: expected a string key, found character '}'");
    CHECK(open_error(make_file("{} trailing", "")) ==
          "safetensors header of '" + path + "': invalid JSON at byte 11: unexpected character 't' after the end of "
                                             "the JSON value");
  }
  SECTION("header not an object") {
    CHECK(open_error(make_file("[1, 2]", "")) ==
          where + "header is an array, expected a JSON object mapping tensor names to {dtype, shape, data_offsets}");
  }
  SECTION("duplicate tensor names") {
    CHECK(open_error(make_file(R"({"x":{},"x":{}})", "")) ==
          "safetensors header of '" + path + "': invalid JSON at byte 16: duplicate key \"x\" in one object; each "
                                             "key may appear once");
  }
  SECTION("unknown and unsupported dtypes") {
    CHECK(open_error(make_file(R"({"x":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'))) ==
          where + "tensor 'x': unknown safetensors dtype \"F33\" (Fathom reads F32, F16, BF16, F64, I64, I32, BOOL)");
    CHECK(open_error(make_file(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", std::string(2, '\0'))) ==
          where + "tensor 'x': safetensors dtype \"U8\" is valid but Fathom has no such tensor type (it reads F32, "
                  "F16, BF16, F64, I64, I32, BOOL); convert the tensor before saving it");
  }
  SECTION("missing fields and wrong field types") {
    CHECK(open_error(make_file(R"({"x":{"dtype":"F32","shape":[2]}})", "")) ==
          where + "tensor 'x' has no \"data_offsets\" field");
    CHECK(open_error(make_file(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "")) ==
          where + "tensor 'x': shape must hold non-negative integers, found -2 at file byte 37");
    CHECK(open_error(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", "")) ==
          where + "tensor 'x': data_offsets must be an array [begin, end] of two integers");
    CHECK(open_error(make_file(R"({"__metadata__":{"a":1}})", "")) ==
          where + "__metadata__ value of \"a\" is a number; safetensors metadata maps strings to strings");
  }
  SECTION("shape inconsistent with the offsets") {
    CHECK(open_error(make_file(R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                               std::string(24, '\0'))) ==
          where + "tensor 'x' (F32, shape [2, 3]) needs 24 bytes but its data_offsets [0, 20] span 20 bytes; the "
                  "header is inconsistent");
    CHECK(open_error(make_file(R"({"x":{"dtype":"F32","shape":[4000000000,4000000000],"data_offsets":[0,8]}})",
                               std::string(8, '\0'))) ==
          where + "tensor 'x' (F32, shape [4000000000, 4000000000]) needs at least 2^64 bytes but its data_offsets "
                  "[0, 8] span 8 bytes; the header is inconsistent");
    CHECK(open_error(make_file(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", std::string(8, '\0'))) ==
          where + "tensor 'x': data_offsets [8, 0] are reversed (begin > end)");
  }
  SECTION("offsets beyond the data section") {
    CHECK(open_error(make_file(f32x2, std::string(6, '\0'))) ==
          where + "tensor 'x': data_offsets [0, 8] run past the end of the data section (6 bytes, starting at file byte " +
              std::to_string(8 + f32x2.size()) + "); the file is truncated or the header is wrong");
  }
  SECTION("overlapping tensors") {
    CHECK(open_error(make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                               R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                               std::string(24, '\0'))) ==
          where + "tensors 'a' (data_offsets [0, 16]) and 'b' (data_offsets [8, 24]) overlap; each tensor needs its "
                  "own bytes (the file is corrupted)");
  }
  SECTION("BOOL bytes other than 0 and 1") {
    write_bytes(path, make_file(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}} )", std::string("\1\0\7", 3)));
    const SafetensorsFile file(path);
    CHECK(error_of([&] { file.get("m"); }) ==
          where.substr(0, where.size() - 2) + ": BOOL tensor 'm' holds byte value 7 at file byte 66; BOOL elements "
                                              "must be 0 or 1");
  }
  SECTION("tensor not found") {
    write_bytes(path, make_file(R"({"weight":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                                R"("bias":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})",
                                ""));
    const SafetensorsFile file(path);
    CHECK(error_of([&] { file.get("wieght"); }) ==
          "safetensors file '" + path +
              "' has no tensor 'wieght' (did you mean \"weight\"?); it holds 2 tensors: 'bias', 'weight'");
    CHECK(file.get("bias").numel() == 0);
  }
}

TEST_CASE("json reader is strict", "[nn][json]") {
  auto error = [](const std::string& text) { return error_of([&] { parse_json(text, "t"); }); };
  CHECK(error("[1,]") == "t: invalid JSON at byte 3: expected a JSON value, found character ']'");
  CHECK(error("01") == "t: invalid JSON at byte 1: number with a leading zero");
  CHECK(error("\"a\tb\"") == "t: invalid JSON at byte 2: raw control byte 0x09 in a string; write it as an escape "
                             "(\\n, \\u0001)");
  CHECK(error("\"\\x\"") == "t: invalid JSON at byte 2: invalid escape: backslash followed by character 'x' in a string");
  CHECK(error("\"\xff\"") == "t: invalid JSON at byte 1: invalid UTF-8 lead byte 0xff in a string");
  CHECK(error(std::string(300, '[')) == "t: invalid JSON at byte 257: nesting deeper than 256 levels");
  CHECK(error("// c\n{}").rfind("t: invalid JSON at byte 0", 0) == 0);

  const JsonValue v = parse_json(R"( {"s": "\u00e9\ud83d\ude00\n", "n": [-0, 12, 1.5e3, true, null]} )");
  CHECK(v.at("s").as_string() == "\xc3\xa9\xf0\x9f\x98\x80\n");
  const auto& n = v.at("n").as_array();
  CHECK(n[0].as_int64() == 0);
  CHECK(n[1].as_int64() == 12);
  CHECK_FALSE(n[2].is_integer());
  CHECK(n[2].as_double() == 1500.0);
  CHECK(n[3].as_bool());
  CHECK(n[4].is_null());
  CHECK(error_of([&] { n[2].as_int64(); }) == "JSON number 1.5e3 at byte 45 is not an integer in the int64 range");

  std::string quoted;
  append_json_string(quoted, "a\"b\\c\x01\xc3\xa9");
  CHECK(quoted == "\"a\\\"b\\\\c\\u0001\xc3\xa9\"");
  CHECK(parse_json(quoted).as_string() == "a\"b\\c\x01\xc3\xa9");
}
