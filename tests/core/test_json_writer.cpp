// JsonWriter: layouts, quoting, numbers that read back exactly, and misuse refused.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/json.h"
#include "core/json_writer.h"
#include "test_util.h"

using namespace fathom;
using fathom::testing::error_of;

TEST_CASE("JsonWriter: pretty objects, inline and compact containers", "[core]") {
  JsonWriter w;
  w.begin_object().member("name", "a \"quoted\"\nline").member("count", 3).member("ok", true);
  w.key("empty").begin_object().end_object();
  w.key("shape").begin_array(JsonWriter::Layout::Inline).value(2).value(3).end_array();
  w.key("rows").begin_array();
  w.begin_object(JsonWriter::Layout::Inline).member("rank", 0).key("nested").begin_object().member("x", 1.5).end_object();
  w.end_object();
  w.end_array();
  w.key("none").null();
  w.end_object();
  CHECK(w.str() ==
        "{\n"
        "  \"name\": \"a \\\"quoted\\\"\\nline\",\n"
        "  \"count\": 3,\n"
        "  \"ok\": true,\n"
        "  \"empty\": {},\n"
        "  \"shape\": [2, 3],\n"
        "  \"rows\": [\n"
        "    {\"rank\": 0, \"nested\": {\"x\": 1.5}}\n"
        "  ],\n"
        "  \"none\": null\n"
        "}");
  JsonWriter compact(JsonWriter::Layout::Compact);
  compact.begin_object().member("k", "v").key("a").begin_array().value(1).value(2).end_array().end_object();
  CHECK(compact.str() == R"({"k":"v","a":[1,2]})");
}

TEST_CASE("JsonWriter: doubles read back exactly and stay floats", "[core]") {
  for (double x : {1.0, 0.1, 1e-300, 6e-4, 65536.0, -2.5e17, 1.0 / 3.0}) {
    JsonWriter w;
    w.begin_array().value(x).end_array();
    const JsonValue back = parse_json(w.str());
    CHECK(back.as_array()[0].as_double() == x);
    CHECK_FALSE(back.as_array()[0].is_integer());
  }
  CHECK(json_number(1.0) == "1.0");
  CHECK(error_of([] { json_number(std::nan("")); }) == "JSON has no representation for nan (only finite numbers)");
}

TEST_CASE("JsonWriter: misuse is an error, not broken JSON", "[core]") {
  CHECK(error_of([] { JsonWriter().begin_object().value(1); }) ==
        "JsonWriter: a value inside an object needs a key first");
  CHECK(error_of([] { JsonWriter().begin_array().key("k"); }) == "JsonWriter: a key outside an object");
  CHECK(error_of([] { JsonWriter().begin_array().end_object(); }) ==
        "JsonWriter: end_object does not close the innermost container");
  CHECK(error_of([] { (void)JsonWriter().begin_object().str(); }) == "JsonWriter: 1 container(s) still open");
}
