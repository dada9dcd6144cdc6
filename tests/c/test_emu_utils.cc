// Standalone tests for the emulator utility modules: json.{h,cc}, reduce.{h,cc}, securec.cc.
// Build (see tests/test_emu_utils.py):
//   g++ -std=c++17 -O2 -Wall -Wextra -Werror -pthread -I hcomm_kit/emu/include -I hcomm_kit/emu/src
//       hcomm_kit/emu/src/{json,reduce,securec}.cc tests/c/test_emu_utils.cc
// Usage: test_emu_utils [scratch-dir]   (default $TMPDIR or /tmp). Exit code 0 iff all checks pass.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "base/reduce.h"
#include "securec.h"

namespace {

int g_passed = 0;
int g_failed = 0;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            ++g_passed;                                                             \
        } else {                                                                    \
            ++g_failed;                                                             \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

// Like CHECK, with a printf-style explanation on failure.
#define CHECK_MSG(cond, ...)                                                        \
    do {                                                                            \
        if (cond) {                                                                 \
            ++g_passed;                                                             \
        } else {                                                                    \
            ++g_failed;                                                             \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                      \
            std::fputc('\n', stderr);                                               \
        }                                                                           \
    } while (0)

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint64_t next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

std::string g_scratch = "/tmp";

// ============================================================================ JSON

using emu::json::Value;

bool parse_ok(const std::string& text, Value& v) {
    std::string err;
    bool ok = emu::json::parse(text, v, err);
    if (!ok) std::fprintf(stderr, "  unexpected parse error: %s\n", err.c_str());
    return ok;
}

void test_json_valid() {
    const std::string doc =
        "\xEF\xBB\xBF{\n"
        "  \"version\": \"1.0\", \"server_count\": 2,\n"
        "  \"server_list\": [ {\"server_id\": \"10.0.0.1\", \"device\": [{\"device_id\": 0, \"rank_id\": 0}]},\n"
        "                   {\"server_id\": \"10.0.0.2\", \"device\": []} ],\n"
        "  \"flags\": [true, false, null], \"empty\": {}, \"one\": 1,\n"
        "  \"nums\": [0, -0, 12, -7, 1.5, 1e3, 2.5E-2, 1E+2, 123456789012, -0.0e0, 1e-400, -1e-400,"
        " 1.7976931348623157e308, 4.9e-324]\r\n"
        "}\t ";
    Value v;
    CHECK(parse_ok(doc, v));
    CHECK(v.is_object());
    CHECK(v.obj.size() == 7);
    CHECK(v.obj[0].first == "version" && v.obj[6].first == "nums");  // file order kept
    CHECK(v.get("version") && v.get("version")->is_string() && v.get("version")->str == "1.0");
    CHECK(v.get("server_count") && v.get("server_count")->is_number() && v.get("server_count")->num == 2);
    CHECK(v.get("server_count")->is_integer());
    CHECK(v.get("missing") == nullptr);
    CHECK(v.get("version")->get("x") == nullptr);  // not an object
    const Value* sl = v.get("server_list");
    CHECK(sl && sl->is_array() && sl->arr.size() == 2);
    if (sl && sl->arr.size() == 2) {
        const Value* dev = sl->arr[0].get("device");
        CHECK(dev && dev->is_array() && dev->arr.size() == 1);
        if (dev && dev->arr.size() == 1) CHECK(dev->arr[0].get("rank_id")->num == 0);
        CHECK(sl->arr[1].get("device")->arr.empty());
    }
    const Value* flags = v.get("flags");
    CHECK(flags && flags->arr.size() == 3 && flags->arr[0].is_bool() && flags->arr[0].b &&
          flags->arr[1].is_bool() && !flags->arr[1].b && flags->arr[2].is_null());
    CHECK(v.get("empty") && v.get("empty")->is_object() && v.get("empty")->obj.empty());
    CHECK(v.get("one") && v.get("one")->num == 1);
    const Value* n = v.get("nums");
    CHECK(n && n->arr.size() == 14);
    if (n && n->arr.size() == 14) {
        const double want[] = {0, -0.0, 12, -7, 1.5, 1000, 0.025, 100, 123456789012.0, -0.0, 0, -0.0,
                               1.7976931348623157e308, 4.9e-324};
        for (size_t i = 0; i < 14; ++i) {
            CHECK_MSG(n->arr[i].num == want[i] && std::signbit(n->arr[i].num) == std::signbit(want[i]),
                      "nums[%zu] = %.17g", i, n->arr[i].num);
        }
        CHECK(!n->arr[4].is_integer() && n->arr[8].is_integer());
    }
    CHECK(std::string(v.type_name()) == "object");

    // Scalars at top level and surrounding whitespace.
    CHECK(parse_ok(" 42 ", v) && v.is_number() && v.num == 42);
    CHECK(parse_ok("\"\"", v) && v.is_string() && v.str.empty());
    CHECK(parse_ok("null", v) && v.is_null());
    CHECK(parse_ok("[[[]]]", v) && v.is_array() && v.arr.size() == 1 && v.arr[0].arr[0].arr.empty());
}

void test_json_strings() {
    Value v;
    CHECK(parse_ok("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", v) && v.str == "\"\\/\b\f\n\r\t");
    CHECK(parse_ok("\"\\u0041\\u00e9\\u20AC\"", v) && v.str == "A\xC3\xA9\xE2\x82\xAC");
    CHECK(parse_ok("\"\\uD83D\\uDE00\"", v) && v.str == "\xF0\x9F\x98\x80");         // U+1F600
    CHECK(parse_ok("\"\\udbff\\udfff\"", v) && v.str == "\xF4\x8F\xBF\xBF");         // U+10FFFF
    CHECK(parse_ok("\"a\\u0000b\"", v) && v.str == std::string("a\0b", 3));
    CHECK(parse_ok("\"\\u07FF\\u0800\\uFFFF\"", v) && v.str == "\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF");
    CHECK(parse_ok("\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 raw\"", v) && v.str == "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 raw");
    CHECK(parse_ok("{\"k\\u00e9y\": 1}", v) && v.get("k\xC3\xA9y") && v.get("k\xC3\xA9y")->num == 1);
}

void expect_error(const std::string& text, const std::string& want, int line) {
    Value v;
    v.type = Value::Type::Bool;  // must be reset to null on failure
    std::string err;
    bool ok = emu::json::parse(text, v, err);
    if (!ok && err == want && v.is_null()) {
        ++g_passed;
    } else {
        ++g_failed;
        std::fprintf(stderr, "%s:%d: JSON error mismatch\n  want: %s\n  got:  %s%s\n", __FILE__, line, want.c_str(),
                     ok ? "(parsed OK)" : err.c_str(), v.is_null() ? "" : " (out not reset)");
    }
}
#define EXPECT_ERROR(text, want) expect_error(text, want, __LINE__)

void test_json_errors() {
    EXPECT_ERROR("", "line 1, column 1: unexpected end of input, expected a value");
    EXPECT_ERROR("  \n ", "line 2, column 2: unexpected end of input, expected a value");
    EXPECT_ERROR("{", "line 1, column 2: unexpected end of input, expected a string key");
    EXPECT_ERROR("[", "line 1, column 2: unexpected end of input, expected a value");
    EXPECT_ERROR("[1", "line 1, column 3: unexpected end of input, expected ',' or ']'");
    EXPECT_ERROR("{\"a\"", "line 1, column 5: unexpected end of input, expected ':'");
    EXPECT_ERROR("{\"a\":1", "line 1, column 7: unexpected end of input, expected ',' or '}'");
    EXPECT_ERROR("[1,]", "line 1, column 4: trailing comma before ']'");
    EXPECT_ERROR("{\"a\":1,}", "line 1, column 8: trailing comma before '}'");
    EXPECT_ERROR("{\"a\" 1}", "line 1, column 6: unexpected character '1', expected ':'");
    EXPECT_ERROR("{1:2}", "line 1, column 2: unexpected character '1', expected a string key");
    EXPECT_ERROR("{'a':2}", "line 1, column 2: unexpected character ''', expected a string key");
    EXPECT_ERROR("[1 2]", "line 1, column 4: unexpected character '2', expected ',' or ']'");
    EXPECT_ERROR("{\"a\":1 \"b\":2}", "line 1, column 8: unexpected character '\"', expected ',' or '}'");
    EXPECT_ERROR("[,1]", "line 1, column 2: unexpected character ',', expected a value");
    EXPECT_ERROR("tru", "line 1, column 1: invalid literal (expected 'true')");
    EXPECT_ERROR("[nul]", "line 1, column 2: invalid literal (expected 'null')");
    EXPECT_ERROR("fals", "line 1, column 1: invalid literal (expected 'false')");
    EXPECT_ERROR("True", "line 1, column 1: unexpected character 'T', expected a value");
    EXPECT_ERROR("NaN", "line 1, column 1: unexpected character 'N', expected a value");
    EXPECT_ERROR("[-Infinity]", "line 1, column 3: invalid number: expected a digit after '-'");
    EXPECT_ERROR("// c\n1", "line 1, column 1: unexpected character '/', expected a value");
    EXPECT_ERROR("01", "line 1, column 1: invalid number: leading zeros are not allowed");
    EXPECT_ERROR("-", "line 1, column 2: invalid number: expected a digit after '-'");
    EXPECT_ERROR("1.", "line 1, column 3: invalid number: expected a digit after '.'");
    EXPECT_ERROR("1.e5", "line 1, column 3: invalid number: expected a digit after '.'");
    EXPECT_ERROR("1e", "line 1, column 3: invalid number: expected a digit in the exponent");
    EXPECT_ERROR("1e+", "line 1, column 4: invalid number: expected a digit in the exponent");
    EXPECT_ERROR("+1", "line 1, column 1: unexpected character '+', expected a value");
    EXPECT_ERROR(".5", "line 1, column 1: unexpected character '.', expected a value");
    EXPECT_ERROR("0x10", "line 1, column 2: unexpected character 'x' after the end of the document");
    EXPECT_ERROR("[1e400]", "line 1, column 2: number out of range for a double");
    EXPECT_ERROR("-123456789e999", "line 1, column 1: number out of range for a double");
    EXPECT_ERROR("\"abc", "line 1, column 5: unexpected end of input in string");
    EXPECT_ERROR("\"a\x01\"", "line 1, column 3: unescaped control character U+0001 in string");
    EXPECT_ERROR("\"a\tb\"", "line 1, column 3: unescaped control character U+0009 in string");
    EXPECT_ERROR("\"a\nb\"", "line 1, column 3: unescaped control character U+000A in string");
    EXPECT_ERROR("\"\\x\"", "line 1, column 2: invalid escape '\\x' in string");
    EXPECT_ERROR("\"\\'\"", "line 1, column 2: invalid escape '\\'' in string");
    EXPECT_ERROR("\"\\", "line 1, column 3: unexpected end of input in string");
    EXPECT_ERROR("\"\\u12G4\"", "line 1, column 2: invalid \\u escape (expected 4 hex digits)");
    EXPECT_ERROR("\"\\u12", "line 1, column 6: unexpected end of input in \\u escape");
    EXPECT_ERROR("\"\\uD800\"", "line 1, column 2: high surrogate in \\u escape not followed by a low surrogate");
    EXPECT_ERROR("\"\\uD800\\u0041\"", "line 1, column 2: high surrogate in \\u escape not followed by a low surrogate");
    EXPECT_ERROR("\"\\uD800\\uD800\"", "line 1, column 2: high surrogate in \\u escape not followed by a low surrogate");
    EXPECT_ERROR("\"\\uDC00\"", "line 1, column 2: unpaired low surrogate in \\u escape");
    EXPECT_ERROR("\"\xFF\"", "line 1, column 2: invalid UTF-8 byte 0xFF in string");
    EXPECT_ERROR("\"\xC0\xAF\"", "line 1, column 2: invalid UTF-8 byte 0xC0 in string");       // overlong
    EXPECT_ERROR("\"\xE0\x80\xAF\"", "line 1, column 2: invalid UTF-8 byte 0xE0 in string");   // overlong
    EXPECT_ERROR("\"\xED\xA0\x80\"", "line 1, column 2: invalid UTF-8 byte 0xED in string");   // surrogate
    EXPECT_ERROR("\"\xF4\x90\x80\x80\"", "line 1, column 2: invalid UTF-8 byte 0xF4 in string"); // > U+10FFFF
    EXPECT_ERROR("\"\xC3\"", "line 1, column 2: invalid UTF-8 byte 0xC3 in string");          // truncated
    EXPECT_ERROR("\xFF", "line 1, column 1: unexpected byte 0xFF, expected a value");
    EXPECT_ERROR("[1] x", "line 1, column 5: unexpected character 'x' after the end of the document");
    EXPECT_ERROR("{} {}", "line 1, column 4: unexpected character '{' after the end of the document");
    EXPECT_ERROR("{}\n\n  ]", "line 3, column 3: unexpected character ']' after the end of the document");
    EXPECT_ERROR("{\n  \"a\": [1,\n    2,,\n]}", "line 3, column 7: unexpected character ',', expected a value");
    EXPECT_ERROR("{\r\n\"a\":\r\n}", "line 3, column 1: unexpected character '}', expected a value");
    // Columns count characters: U+00E9 is 2 bytes but one column.
    EXPECT_ERROR("[\"\xC3\xA9\", x]", "line 1, column 7: unexpected character 'x', expected a value");
    EXPECT_ERROR("\xEF\xBB\xBF[x]", "line 1, column 2: unexpected character 'x', expected a value");  // BOM skipped
    EXPECT_ERROR(std::string("[\0]", 3), "line 1, column 2: unexpected byte 0x00, expected a value");
    // A key may appear once per object (small objects: scan; from 16 members: hash index).
    EXPECT_ERROR("{\"a\":1,\"a\":2}",
                 "line 1, column 8: duplicate key \"a\" (first at line 1, column 2); each key may appear once per object");
    EXPECT_ERROR("{\"a\":1,\n \"b\":{\"a\":2},\n \"a\":3}",
                 "line 3, column 2: duplicate key \"a\" (first at line 1, column 2); each key may appear once per object");
    std::string big = "{";
    for (int i = 0; i < 40; ++i) big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
    Value ok;
    CHECK(parse_ok(big + "\"k40\":40}", ok) && ok.obj.size() == 41);
    EXPECT_ERROR(big + "\"k17\":0}", "line 1, column " + std::to_string(big.size() + 1) +
                                        ": duplicate key \"k17\" (first at line 1, column 135); each key may appear once "
                                        "per object");
    CHECK(parse_ok("{\"x\":{\"a\":1},\"a\":{\"a\":2}}", ok));  // the same key in different objects
}

void test_json_depth() {
    Value v;
    std::string ok64 = std::string(64, '[') + std::string(64, ']');
    CHECK(parse_ok(ok64, v));
    EXPECT_ERROR(std::string(65, '[') + std::string(65, ']'), "line 1, column 65: nesting deeper than 64 levels");
    std::string objs;
    for (int i = 0; i < 64; ++i) objs += "{\"a\":";
    CHECK(parse_ok(objs + "1" + std::string(64, '}'), v));
    int depth = 0;
    for (const Value* p = &v; p && p->is_object(); p = p->get("a")) ++depth;
    CHECK(depth == 64);
    EXPECT_ERROR(objs + "{\"a\":1}" + std::string(64, '}'), "line 1, column 321: nesting deeper than 64 levels");
    // Very deep input must fail cleanly (no stack exhaustion).
    std::string err;
    CHECK(!emu::json::parse(std::string(1000000, '['), v, err) && err.find("nesting deeper") != std::string::npos);
    CHECK(!emu::json::parse(std::string(1000000, '{'), v, err));
}

void test_json_read_file() {
    std::string path = g_scratch + "/emu_json_test_" + std::to_string(getpid()) + ".json";
    const std::string body = "{\"rank_count\": 8, \"name\": \"\xE2\x82\xAC\"}\n";
    FILE* f = std::fopen(path.c_str(), "wb");
    CHECK(f != nullptr);
    if (f) {
        std::fwrite(body.data(), 1, body.size(), f);
        std::fclose(f);
    }
    std::string text, err;
    CHECK(emu::json::read_file(path, text, err) && text == body);
    Value v;
    CHECK(parse_ok(text, v) && v.get("rank_count")->num == 8 && v.get("name")->str == "\xE2\x82\xAC");
    ::unlink(path.c_str());

    const std::string missing = g_scratch + "/definitely_missing_dir/x.json";
    CHECK(!emu::json::read_file(missing, text, err));
    CHECK_MSG(err.find(missing) != std::string::npos && err.find("No such file or directory") != std::string::npos,
              "err = %s", err.c_str());
    emu::json::ReadStatus st = emu::json::ReadStatus::Ok;
    CHECK(!emu::json::read_file(g_scratch, text, err, &st) && st == emu::json::ReadStatus::NotRegular);
    CHECK_MSG(err.find("a directory") != std::string::npos, "err = %s", err.c_str());
    // Devices and FIFOs are refused without reading or blocking; so is a file above the limit.
    CHECK(!emu::json::read_file("/dev/zero", text, err, &st) && st == emu::json::ReadStatus::NotRegular);
    CHECK_MSG(err.find("character device") != std::string::npos, "err = %s", err.c_str());
    std::string fifo = g_scratch + "/emu_json_fifo_" + std::to_string(getpid());
    if (::mkfifo(fifo.c_str(), 0600) == 0) {
        CHECK(!emu::json::read_file(fifo, text, err, &st) && st == emu::json::ReadStatus::NotRegular);
        CHECK_MSG(err.find("FIFO") != std::string::npos, "err = %s", err.c_str());
        ::unlink(fifo.c_str());
    }
    f = std::fopen(path.c_str(), "wb");
    if (f) {
        std::fwrite(body.data(), 1, body.size(), f);
        std::fclose(f);
    }
    CHECK(!emu::json::read_file(path, text, err, &st, body.size() - 1) && st == emu::json::ReadStatus::TooLarge);
    CHECK_MSG(err.find("above the limit of " + std::to_string(body.size() - 1) + " bytes") != std::string::npos,
              "err = %s", err.c_str());
    CHECK(emu::json::read_file(path, text, err, &st, body.size()) && st == emu::json::ReadStatus::Ok && text == body);
    ::unlink(path.c_str());
    // An empty file reads fine and then fails to parse at 1:1.
    std::string empty = g_scratch + "/emu_json_empty_" + std::to_string(getpid()) + ".json";
    f = std::fopen(empty.c_str(), "wb");
    if (f) std::fclose(f);
    CHECK(emu::json::read_file(empty, text, err) && text.empty());
    ::unlink(empty.c_str());
}

// ============================================================================ fp16 / bf16

// Independent reference conversions (ldexp / nearbyint in double).
double ref_half_to_double(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    double mag;
    if (e == 0) {
        mag = std::ldexp(m, -24);
    } else if (e == 31) {
        mag = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    } else {
        mag = std::ldexp(1024 + m, e - 25);
    }
    return (h & 0x8000) ? -mag : mag;
}

// Round a double to binary16 (RNE). NaN -> 0x7E00 with sign.
uint16_t ref_double_to_half(double v) {
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    if (std::isnan(v)) return sign | 0x7E00;
    double x = std::fabs(v);
    if (std::isinf(x)) return sign | 0x7C00;
    if (x == 0) return sign;
    const int e = std::max(std::ilogb(x), -14);
    const double q = std::ldexp(1.0, e - 10);
    const double r = std::nearbyint(x / q) * q;  // default rounding mode: ties to even
    if (r >= 65536.0) return sign | 0x7C00;
    if (r < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(r / std::ldexp(1.0, -24));
    const int e2 = std::ilogb(r);
    const int m = static_cast<int>(r / std::ldexp(1.0, e2 - 10)) - 1024;
    return sign | static_cast<uint16_t>(((e2 + 15) << 10) | m);
}

double ref_bf16_to_double(uint16_t h) {
    const int e = (h >> 7) & 255, m = h & 127;
    double mag;
    if (e == 0) {
        mag = std::ldexp(m, -133);
    } else if (e == 255) {
        mag = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    } else {
        mag = std::ldexp(128 + m, e - 134);
    }
    return (h & 0x8000) ? -mag : mag;
}

uint16_t ref_double_to_bf16(double v) {
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    if (std::isnan(v)) return sign | 0x7FC0;
    double x = std::fabs(v);
    if (std::isinf(x)) return sign | 0x7F80;
    if (x == 0) return sign;
    const int e = std::max(std::ilogb(x), -126);
    const double q = std::ldexp(1.0, e - 7);
    const double r = std::nearbyint(x / q) * q;
    if (r >= std::ldexp(1.0, 128)) return sign | 0x7F80;
    if (r < std::ldexp(1.0, -126)) return sign | static_cast<uint16_t>(r / std::ldexp(1.0, -133));
    const int e2 = std::ilogb(r);
    const int m = static_cast<int>(r / std::ldexp(1.0, e2 - 7)) - 128;
    return sign | static_cast<uint16_t>(((e2 + 127) << 7) | m);
}

bool half_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }
bool bf16_is_nan(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x7F); }
float bitsf(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

void test_half_conversions() {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {  // exhaustive widening + round trip
        const float f = emu::half_to_float(static_cast<uint16_t>(h));
        const double r = ref_half_to_double(static_cast<uint16_t>(h));
        bool ok;
        if (half_is_nan(static_cast<uint16_t>(h))) {
            ok = std::isnan(f) && std::signbit(f) == ((h & 0x8000) != 0) && half_is_nan(emu::float_to_half(f));
        } else {
            ok = static_cast<double>(f) == r && std::signbit(f) == std::signbit(r) && emu::float_to_half(f) == h;
        }
        if (!ok && bad++ < 5) std::fprintf(stderr, "  half 0x%04X -> %a (ref %a)\n", h, static_cast<double>(f), r);
    }
    CHECK(bad == 0);

    bad = 0;  // ties and neighbours between every pair of adjacent finite halves (both signs)
    for (uint32_t i = 0; i < 0x7BFF; ++i) {
        const double lo = ref_half_to_double(static_cast<uint16_t>(i)), hi = ref_half_to_double(static_cast<uint16_t>(i + 1));
        const float mid = static_cast<float>((lo + hi) / 2);  // exact in float
        const uint16_t even = (i & 1) ? static_cast<uint16_t>(i + 1) : static_cast<uint16_t>(i);
        for (int s = 0; s < 2; ++s) {
            const float sg = s ? -1.0f : 1.0f;
            const uint16_t sb = s ? 0x8000 : 0;
            if (emu::float_to_half(sg * mid) != (sb | even)) ++bad;
            if (emu::float_to_half(sg * std::nextafter(mid, 0.0f)) != (sb | i)) ++bad;
            if (emu::float_to_half(sg * std::nextafter(mid, 1e9f)) != (sb | (i + 1))) ++bad;
        }
    }
    CHECK_MSG(bad == 0, "%d tie/neighbour mismatches", bad);

    // Overflow boundary: 65504 is the max; 65520 is the tie with 2^16 -> rounds to inf (even).
    CHECK(emu::float_to_half(65504.0f) == 0x7BFF);
    CHECK(emu::float_to_half(65519.996f) == 0x7BFF);
    CHECK(emu::float_to_half(65520.0f) == 0x7C00);
    CHECK(emu::float_to_half(-65520.0f) == 0xFC00);
    CHECK(emu::float_to_half(1e10f) == 0x7C00);
    CHECK(emu::float_to_half(std::numeric_limits<float>::infinity()) == 0x7C00);
    CHECK(emu::float_to_half(-std::numeric_limits<float>::infinity()) == 0xFC00);
    CHECK(half_is_nan(emu::float_to_half(std::numeric_limits<float>::quiet_NaN())));
    CHECK(half_is_nan(emu::float_to_half(bitsf(0x7F800001u))));  // NaN with payload only in low bits
    CHECK(half_is_nan(emu::float_to_half(bitsf(0xFF800001u))) && (emu::float_to_half(bitsf(0xFF800001u)) & 0x8000));
    // Subnormals and underflow.
    CHECK(emu::float_to_half(0x1.0p-24f) == 0x0001);
    CHECK(emu::float_to_half(0x1.0p-25f) == 0x0000);          // tie -> even (0)
    CHECK(emu::float_to_half(0x1.8p-25f) == 0x0001);
    CHECK(emu::float_to_half(0x1.8p-24f) == 0x0002);          // 1.5 ulp tie -> even (2)
    CHECK(emu::float_to_half(-0x1.0p-26f) == 0x8000);         // -0
    CHECK(emu::float_to_half(0x1.0p-14f) == 0x0400);          // min normal
    CHECK(emu::float_to_half(0x1.ff8p-15f) == 0x03FF);        // max subnormal
    CHECK(emu::float_to_half(0x1.ffcp-15f) == 0x0400);        // tie: rounds up into the normals (even)
    CHECK(emu::float_to_half(bitsf(0x00000001u)) == 0x0000);  // float subnormal
    CHECK(emu::float_to_half(-0.0f) == 0x8000);
    CHECK(emu::half_to_float(0x0001) == 0x1.0p-24f);
    CHECK(emu::half_to_float(0x03FF) == 0x1.ff8p-15f);
    CHECK(std::isinf(emu::half_to_float(0x7C00)) && emu::half_to_float(0xFC00) < 0);

    bad = 0;  // random floats against the reference rounding
    Rng rng(1);
    for (int k = 0; k < 300000; ++k) {
        float f = bitsf(static_cast<uint32_t>(rng.next()));
        if (k & 1) f = static_cast<float>(rng.uniform(-70000, 70000)) * bitsf(0x3F800000u + ((rng.next() % 40) << 23)) * 0x1.0p-30f;
        const uint16_t got = emu::float_to_half(f), want = ref_double_to_half(static_cast<double>(f));
        const bool ok = std::isnan(f) ? half_is_nan(got) : got == want;
        if (!ok && bad++ < 5) std::fprintf(stderr, "  float %a -> 0x%04X (ref 0x%04X)\n", static_cast<double>(f), got, want);
    }
    CHECK(bad == 0);
}

void test_bf16_conversions() {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t hb = static_cast<uint16_t>(h);
        const float f = emu::bf16_to_float(hb);
        const double r = ref_bf16_to_double(hb);
        bool ok;
        if (bf16_is_nan(hb)) {
            ok = std::isnan(f) && bf16_is_nan(emu::float_to_bf16(f));
        } else {
            ok = static_cast<double>(f) == r && std::signbit(f) == std::signbit(r) && emu::float_to_bf16(f) == hb;
            if (h < 0x7F80 || (h >= 0x8000 && h < 0xFF80)) {  // finite: ties and neighbours above
                const uint32_t u = h << 16;
                const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : hb;
                ok = ok && emu::float_to_bf16(bitsf(u | 0x8000u)) == even;  // (0x7F7F ties up to inf)
                ok = ok && emu::float_to_bf16(bitsf(u | 0x7FFFu)) == hb;
                ok = ok && emu::float_to_bf16(bitsf(u | 0x8001u)) == static_cast<uint16_t>(h + 1);
            }
        }
        if (!ok && bad++ < 5) std::fprintf(stderr, "  bf16 0x%04X mismatch\n", h);
    }
    CHECK(bad == 0);
    CHECK(emu::float_to_bf16(bitsf(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX rounds to inf
    CHECK(bf16_is_nan(emu::float_to_bf16(bitsf(0x7F800001u))));  // truncation would give inf
    CHECK(bf16_is_nan(emu::float_to_bf16(bitsf(0xFFFFFFFFu))) && (emu::float_to_bf16(bitsf(0xFFFFFFFFu)) & 0x8000));
    CHECK(emu::float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
    CHECK(emu::float_to_bf16(bitsf(0x00000001u)) == 0x0000);    // tiny float subnormal
    CHECK(emu::float_to_bf16(bitsf(0x00008000u)) == 0x0000);    // tie -> even (0)
    CHECK(emu::float_to_bf16(bitsf(0x00018000u)) == 0x0002);    // tie -> even (2)
    CHECK(emu::float_to_bf16(1.0f) == 0x3F80 && emu::bf16_to_float(0x3F80) == 1.0f);
    bad = 0;
    Rng rng(2);
    for (int k = 0; k < 300000; ++k) {
        const float f = bitsf(static_cast<uint32_t>(rng.next()));
        const uint16_t got = emu::float_to_bf16(f), want = ref_double_to_bf16(static_cast<double>(f));
        if (!(std::isnan(f) ? bf16_is_nan(got) : got == want) && bad++ < 5)
            std::fprintf(stderr, "  float %a -> bf16 0x%04X (ref 0x%04X)\n", static_cast<double>(f), got, want);
    }
    CHECK(bad == 0);
}

// ============================================================================ reductions

const int kAllDtypes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

bool dt_signed(int dt) { return dt == 0 || dt == 1 || dt == 2 || dt == 5; }
bool dt_int(int dt) { return dt <= 2 || (dt >= 5 && dt <= 9); }

// Reference element op on raw little-endian storage.
void ref_apply(int dt, int op, const unsigned char* a, const unsigned char* b, unsigned char* out) {
    const size_t sz = emu::dtype_size(dt);
    if (dt_int(dt)) {
        auto load = [&](const unsigned char* p) -> uint64_t {  // sign/zero-extend to 64 bits
            uint64_t u = 0;
            std::memcpy(&u, p, sz);
            if (dt_signed(dt) && sz < 8 && (u >> (sz * 8 - 1)) & 1) u |= ~uint64_t(0) << (sz * 8);
            return u;
        };
        const uint64_t x = load(a), y = load(b);
        uint64_t r;
        const bool x_lt_y = dt_signed(dt) ? static_cast<int64_t>(x) < static_cast<int64_t>(y) : x < y;
        switch (op) {
            case 0: r = x + y; break;
            case 1: r = x * y; break;
            case 2: r = x_lt_y ? y : x; break;
            default: r = x_lt_y ? x : y; break;
        }
        std::memcpy(out, &r, sz);  // low bytes: wraps modulo 2^n
        return;
    }
    auto fop = [op](double x, double y) -> double {
        if (op >= 2) {
            if (std::isnan(x)) return x;
            if (std::isnan(y)) return y;
            return op == 2 ? std::max(x, y) : std::min(x, y);
        }
        return op == 0 ? x + y : x * y;
    };
    if (dt == 4) {  // fp32: natively in float
        float x, y, r;
        std::memcpy(&x, a, 4);
        std::memcpy(&y, b, 4);
        if (op == 0) r = x + y;
        else if (op == 1) r = x * y;
        else r = static_cast<float>(fop(x, y));
        std::memcpy(out, &r, 4);
    } else if (dt == 10) {
        double x, y, r;
        std::memcpy(&x, a, 8);
        std::memcpy(&y, b, 8);
        r = fop(x, y);
        std::memcpy(out, &r, 8);
    } else {  // fp16 / bf16: exact-ish double op, then one correct rounding
        uint16_t x, y, r;
        std::memcpy(&x, a, 2);
        std::memcpy(&y, b, 2);
        if (dt == 3) r = ref_double_to_half(fop(ref_half_to_double(x), ref_half_to_double(y)));
        else r = ref_double_to_bf16(fop(ref_bf16_to_double(x), ref_bf16_to_double(y)));
        std::memcpy(out, &r, 2);
    }
}

bool same_value(int dt, const unsigned char* x, const unsigned char* y) {
    const size_t sz = emu::dtype_size(dt);
    if (dt == 3 || dt == 11) {
        uint16_t a, b;
        std::memcpy(&a, x, 2);
        std::memcpy(&b, y, 2);
        if (dt == 3 && half_is_nan(a)) return half_is_nan(b);
        if (dt == 11 && bf16_is_nan(a)) return bf16_is_nan(b);
    } else if (dt == 4) {
        float a, b;
        std::memcpy(&a, x, 4);
        std::memcpy(&b, y, 4);
        if (std::isnan(a)) return std::isnan(b);
    } else if (dt == 10) {
        double a, b;
        std::memcpy(&a, x, 8);
        std::memcpy(&b, y, 8);
        if (std::isnan(a)) return std::isnan(b);
    }
    return std::memcmp(x, y, sz) == 0;
}

// Random element: integers uniform over all bit patterns (exercises wraparound); floats mostly
// moderate values plus some arbitrary bit patterns (NaN, inf, subnormals, huge).
void rand_elem(int dt, Rng& rng, unsigned char* out) {
    const size_t sz = emu::dtype_size(dt);
    uint64_t bits = rng.next();
    const bool special = rng.next() % 8 == 0;
    if (!dt_int(dt) && !special) {
        const double v = rng.uniform(-64, 64) * (rng.next() % 4 == 0 ? 1e-6 : 1.0);
        if (dt == 3) {
            const uint16_t h = ref_double_to_half(v);
            std::memcpy(out, &h, 2);
        } else if (dt == 11) {
            const uint16_t h = ref_double_to_bf16(v);
            std::memcpy(out, &h, 2);
        } else if (dt == 4) {
            const float f = static_cast<float>(v);
            std::memcpy(out, &f, 4);
        } else {
            std::memcpy(out, &v, 8);
        }
        return;
    }
    std::memcpy(out, &bits, sz);
}

void test_reduce_tables() {
    const size_t sizes[] = {1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2};
    const char* names[] = {"int8", "int16", "int32", "fp16", "fp32", "int64", "uint64", "uint8", "uint16", "uint32", "fp64", "bf16"};
    for (int dt = 0; dt < 12; ++dt) {
        CHECK(emu::dtype_size(dt) == sizes[dt]);
        CHECK(std::string(emu::dtype_name(dt)) == names[dt]);
        for (int op = 0; op < 4; ++op) CHECK(emu::reduce_supported(dt, op));
        CHECK(!emu::reduce_supported(dt, 4) && !emu::reduce_supported(dt, -1) && !emu::reduce_supported(dt, 255));
    }
    for (int dt : {-1, 12, 13, 14, 15, 16, 17, 18, 255}) {
        CHECK(emu::dtype_size(dt) == 0);
        CHECK(std::string(emu::dtype_name(dt)) == "unknown(" + std::to_string(dt) + ")");
        CHECK(!emu::reduce_supported(dt, 0));
    }
    CHECK(std::string(emu::redop_name(0)) == "sum" && std::string(emu::redop_name(1)) == "prod" &&
          std::string(emu::redop_name(2)) == "max" && std::string(emu::redop_name(3)) == "min");
    CHECK(std::string(emu::redop_name(255)) == "unknown(255)");
    // Unsupported / invalid calls return false and touch nothing.
    int32_t d[4] = {1, 2, 3, 4}, s[4] = {1, 1, 1, 1};
    CHECK(!emu::reduce_inplace(d, s, 4, 12, 0));
    CHECK(!emu::reduce_inplace(d, s, 4, 2, 4));
    CHECK(!emu::reduce_inplace(d, s, 4, -1, 0));
    CHECK(!emu::reduce_inplace(nullptr, s, 4, 2, 0));
    CHECK(!emu::reduce_inplace(d, nullptr, 4, 2, 0));
    CHECK(!emu::reduce_inplace(d, s, ~uint64_t(0), 2, 0));  // byte length overflows
    CHECK(d[0] == 1 && d[3] == 4);
    CHECK(emu::reduce_inplace(nullptr, nullptr, 0, 2, 0));  // count 0: no-op
}

// Every dtype x op x count, against ref_apply; also unaligned pointers, dst == src, and guard
// elements after the range that must stay untouched.
void test_reduce_matrix() {
    const uint64_t counts[] = {0, 1, 7, 1023, 1024, 1025, 3 * 1024 + 77};
    Rng rng(42);
    for (int dt : kAllDtypes) {
        const size_t sz = emu::dtype_size(dt);
        for (int op = 0; op < 4; ++op) {
            for (uint64_t count : counts) {
                for (int mode = 0; mode < 3; ++mode) {  // 0: aligned, 1: offset by one element, 2: dst == src
                    const size_t guard = 5, off = mode == 1 ? 1 : 0;
                    const size_t total = (count + guard + off) * sz;
                    std::vector<unsigned char> dst(total), src(total), want;
                    for (size_t i = 0; i < total; i += sz) {
                        rand_elem(dt, rng, &dst[i]);
                        rand_elem(dt, rng, &src[i]);
                    }
                    unsigned char* d = dst.data() + off * sz;
                    const unsigned char* s = mode == 2 ? d : src.data() + off * sz;
                    want = dst;
                    unsigned char* w = want.data() + off * sz;
                    for (size_t i = 0; i < count; ++i) ref_apply(dt, op, w + i * sz, (mode == 2 ? w : s) + i * sz, w + i * sz);
                    const bool ok = emu::reduce_inplace(d, s, count, dt, op);
                    int bad = 0;
                    size_t first = 0;
                    for (size_t i = 0; i < total / sz; ++i) {
                        if (!same_value(dt, &dst[i * sz], &want[i * sz])) {
                            if (bad++ == 0) first = i;
                        }
                    }
                    CHECK_MSG(ok && bad == 0, "%s %s count=%llu mode=%d: %d mismatches, first at %zu", emu::dtype_name(dt),
                              emu::redop_name(op), static_cast<unsigned long long>(count), mode, bad, first);
                }
            }
        }
    }
}

template <class T>
T red1(T a, T b, int dt, int op) {
    emu::reduce_inplace(&a, &b, 1, dt, op);
    return a;
}
uint16_t h(float f) { return emu::float_to_half(f); }
uint16_t bf(float f) { return emu::float_to_bf16(f); }

void test_reduce_edge_cases() {
    // Integer wraparound.
    CHECK(red1<int8_t>(127, 1, 0, 0) == -128);
    CHECK(red1<int8_t>(-128, -1, 0, 0) == 127);
    CHECK(red1<int8_t>(16, 16, 0, 1) == 0);
    CHECK(red1<int8_t>(-128, -1, 0, 1) == -128);
    CHECK(red1<uint8_t>(255, 1, 7, 0) == 0);
    CHECK(red1<uint8_t>(200, 200, 7, 2) == 200 && red1<uint8_t>(200, 3, 7, 3) == 3);
    CHECK(red1<int16_t>(300, 300, 1, 1) == 24464);
    CHECK(red1<int16_t>(32767, 32767, 1, 0) == -2);
    CHECK(red1<uint16_t>(65535, 65535, 8, 1) == 1);  // would overflow int after promotion
    CHECK(red1<int32_t>(INT32_MAX, 1, 2, 0) == INT32_MIN);
    CHECK(red1<int32_t>(65536, 65536, 2, 1) == 0);
    CHECK(red1<int32_t>(-5, 3, 2, 2) == 3 && red1<int32_t>(-5, 3, 2, 3) == -5);
    CHECK(red1<uint32_t>(0xFFFFFFFFu, 0xFFFFFFFFu, 9, 1) == 1u);
    CHECK(red1<uint32_t>(0x80000000u, 1u, 9, 2) == 0x80000000u);
    CHECK(red1<int64_t>(INT64_MIN, -1, 5, 1) == INT64_MIN);
    CHECK(red1<int64_t>(INT64_MAX, 1, 5, 0) == INT64_MIN);
    CHECK(red1<int64_t>(INT64_MIN, INT64_MAX, 5, 3) == INT64_MIN);
    CHECK(red1<uint64_t>(UINT64_MAX, UINT64_MAX, 6, 0) == UINT64_MAX - 1);
    CHECK(red1<uint64_t>(UINT64_MAX, 2, 6, 2) == UINT64_MAX);

    // Floats: NaN propagation in max/min, inf arithmetic.
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (int op : {2, 3}) {
        CHECK(std::isnan(red1<float>(nan, 1.0f, 4, op)) && std::isnan(red1<float>(1.0f, nan, 4, op)));
        CHECK(std::isnan(red1<double>(1.0, static_cast<double>(nan), 10, op)));
        CHECK(half_is_nan(red1<uint16_t>(h(nan), h(1.0f), 3, op)) && half_is_nan(red1<uint16_t>(h(1.0f), h(nan), 3, op)));
        CHECK(bf16_is_nan(red1<uint16_t>(bf(nan), bf(1.0f), 11, op)) && bf16_is_nan(red1<uint16_t>(bf(1.0f), bf(nan), 11, op)));
    }
    CHECK(red1<float>(-inf, 3.0f, 4, 2) == 3.0f && red1<float>(-inf, 3.0f, 4, 3) == -inf);
    CHECK(std::isnan(red1<float>(inf, -inf, 4, 0)));
    CHECK(std::isnan(red1<float>(inf, 0.0f, 4, 1)));
    CHECK(half_is_nan(red1<uint16_t>(0x7C00, 0xFC00, 3, 0)));
    // fp16 overflow and rounding ties (computed in float, one RNE rounding).
    CHECK(red1<uint16_t>(h(65504.0f), h(65504.0f), 3, 0) == 0x7C00);
    CHECK(red1<uint16_t>(h(65504.0f), h(8.0f), 3, 0) == 0x7BFF);   // below the 65520 tie
    CHECK(red1<uint16_t>(h(65504.0f), h(16.0f), 3, 0) == 0x7C00);  // exactly the tie -> inf
    CHECK(red1<uint16_t>(h(2048.0f), h(1.0f), 3, 0) == h(2048.0f));  // 2049: tie -> even 2048
    CHECK(red1<uint16_t>(h(2050.0f), h(1.0f), 3, 0) == h(2052.0f));  // 2051: tie -> even 2052
    CHECK(red1<uint16_t>(h(2048.0f), h(1.5f), 3, 0) == h(2050.0f));  // above the tie
    CHECK(red1<uint16_t>(0x0001, 0x0001, 3, 0) == 0x0002);            // subnormal sum
    CHECK(red1<uint16_t>(0x0001, h(0.5f), 3, 1) == 0x0000);           // 2^-25: tie -> 0
    CHECK(red1<uint16_t>(0x0003, h(0.5f), 3, 1) == 0x0002);           // 1.5 ulp: tie -> 2
    CHECK(red1<uint16_t>(0x0400, h(0.5f), 3, 1) == 0x0200);           // normal -> subnormal
    CHECK(red1<uint16_t>(h(-0.0f), h(0.0f), 3, 0) == 0x0000);
    // bf16 ties.
    CHECK(red1<uint16_t>(bf(256.0f), bf(1.0f), 11, 0) == bf(256.0f));  // 257: tie -> 256
    CHECK(red1<uint16_t>(bf(258.0f), bf(1.0f), 11, 0) == bf(260.0f));  // 259: tie -> 260
    CHECK(red1<uint16_t>(0x7F7F, 0x7F7F, 11, 0) == 0x7F80);            // overflow -> inf
    CHECK(red1<uint16_t>(0x0001, 0x0001, 11, 0) == 0x0002);            // subnormal

    // Partially overlapping ranges: defined as sequential element order.
    int32_t buf[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(emu::reduce_inplace(buf + 1, buf, 7, 2, 0));  // dst[i] += dst[i-1]: running sum
    bool prefix = true;
    for (int i = 0; i < 8; ++i) prefix = prefix && buf[i] == i + 1;
    CHECK(prefix);
    uint16_t hb[4] = {h(1), h(2), h(3), h(4)};
    CHECK(emu::reduce_inplace(hb, hb + 1, 3, 3, 0));  // dst[i] += dst[i+1] (not yet updated)
    CHECK(hb[0] == h(3) && hb[1] == h(5) && hb[2] == h(7) && hb[3] == h(4));

    // Addresses not aligned to the element size (any byte offset is valid device memory): same
    // results as aligned data, also across the 4 KiB staging blocks and for overlapping ranges.
    for (int dt : {1, 2, 4, 10, 3, 11}) {  // int16, int32, fp32, fp64, fp16, bf16
        const size_t es = dt == 1 || dt == 3 || dt == 11 ? 2 : dt == 10 ? 8 : 4;
        const size_t n = 3000;  // > 4096 bytes for every size above 1
        std::vector<unsigned char> raw(n * es * 2 + 32), want_d(n * es), want_s(n * es);
        for (size_t i = 0; i < want_d.size(); ++i) {
            want_d[i] = (unsigned char)(i * 7 + 3);
            want_s[i] = (unsigned char)(i * 13 + 1);
        }
        if (dt == 3 || dt == 4 || dt == 10 || dt == 11)  // keep floats finite: clear the top exponent bit
            for (size_t i = 0; i < n; ++i) want_d[i * es + es - 1] &= 0x3F, want_s[i * es + es - 1] &= 0x3F;
        unsigned char* d = raw.data() + 1;                // odd addresses
        unsigned char* s2 = raw.data() + n * es + 3;
        std::memcpy(d, want_d.data(), n * es);
        std::memcpy(s2, want_s.data(), n * es);
        CHECK(emu::reduce_inplace(want_d.data(), want_s.data(), n, dt, 0));  // aligned reference (vector storage)
        CHECK(emu::reduce_inplace(d, s2, n, dt, 0));
        CHECK_MSG(std::memcmp(d, want_d.data(), n * es) == 0, "misaligned reduce differs (dtype %d)", dt);
    }
    alignas(8) unsigned char ob[8 * 4 + 1];
    int32_t seq[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    std::memcpy(ob + 1, seq, sizeof seq);
    CHECK(emu::reduce_inplace(ob + 1 + 4, ob + 1, 7, 2, 0));  // misaligned running sum, as above
    std::memcpy(seq, ob + 1, sizeof seq);
    bool prefix2 = true;
    for (int i = 0; i < 8; ++i) prefix2 = prefix2 && seq[i] == i + 1;
    CHECK(prefix2);
}

void test_reduce_threads() {
    // The name buffer is thread-local and kernels keep no shared state (checked under TSan).
    std::vector<std::thread> threads;
    std::vector<int> ok(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([t, &ok] {
            std::vector<float> d(5000, 1.0f), s(5000, 2.0f);
            std::vector<uint16_t> hd(5000, emu::float_to_half(1.0f)), hs(5000, emu::float_to_half(0.5f));
            bool good = true;
            for (int it = 0; it < 20; ++it) {
                good = good && emu::reduce_inplace(d.data(), s.data(), d.size(), 4, 0);
                good = good && emu::reduce_inplace(hd.data(), hs.data(), hd.size(), 3, 0);
                good = good && std::string(emu::dtype_name(100 + t)) == "unknown(" + std::to_string(100 + t) + ")";
            }
            good = good && d[4999] == 41.0f && hd[0] == emu::float_to_half(11.0f);
            ok[static_cast<size_t>(t)] = good;
        });
    }
    for (auto& th : threads) th.join();
    CHECK(ok[0] && ok[1] && ok[2] && ok[3]);
}

// ============================================================================ securec

bool all_bytes(const void* p, size_t n, unsigned char v) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i)
        if (c[i] != v) return false;
    return true;
}

int call_vsprintf(char* d, size_t m, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsprintf_s(d, m, fmt, ap);
    va_end(ap);
    return r;
}
int call_vsnprintf(char* d, size_t m, size_t c, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf_s(d, m, c, fmt, ap);
    va_end(ap);
    return r;
}

void test_securec_mem() {
    CHECK(EINVAL_AND_RESET == 150 && ERANGE_AND_RESET == 162 && EOVERLAP_AND_RESET == 182);
    char d[16], s[16] = "0123456789abcde";
    std::memset(d, 'x', sizeof d);
    CHECK(memcpy_s(d, sizeof d, s, 10) == EOK && std::memcmp(d, s, 10) == 0 && d[10] == 'x');
    CHECK(memcpy_s(d, sizeof d, s, 0) == EOK);
    CHECK(memcpy_s(d, sizeof d, d, 8) == EOK && d[0] == '0');  // dest == src is fine
    std::memset(d, 'x', sizeof d);
    CHECK(memcpy_s(d, 8, s, 9) == ERANGE_AND_RESET && all_bytes(d, 8, 0) && d[8] == 'x');
    std::memset(d, 'x', sizeof d);
    CHECK(memcpy_s(d, 8, nullptr, 4) == EINVAL_AND_RESET && all_bytes(d, 8, 0));
    CHECK(memcpy_s(nullptr, 8, s, 4) == EINVAL);
    CHECK(memcpy_s(nullptr, 0, nullptr, 4) == ERANGE);
    std::memset(d, 'x', sizeof d);
    CHECK(memcpy_s(d, 0, s, 4) == ERANGE && d[0] == 'x');
    CHECK(memcpy_s(d, static_cast<size_t>(SECUREC_MEM_MAX_LEN) + 1, s, 4) == ERANGE && d[0] == 'x');
    std::memcpy(d, s, 16);
    CHECK(memcpy_s(d + 2, 14, d, 8) == EOVERLAP_AND_RESET && all_bytes(d + 2, 14, 0) && d[0] == '0');
    std::memcpy(d, s, 16);
    CHECK(memcpy_s(d, 16, d + 4, 8) == EOVERLAP_AND_RESET && all_bytes(d, 16, 0));

    std::memcpy(d, s, 16);
    CHECK(memmove_s(d + 2, 14, d, 8) == EOK && std::memcmp(d, "0101234567abcde", 16) == 0);
    std::memset(d, 'x', sizeof d);
    CHECK(memmove_s(d, 4, s, 5) == ERANGE_AND_RESET && all_bytes(d, 4, 0) && d[4] == 'x');
    CHECK(memmove_s(d, 4, nullptr, 1) == EINVAL_AND_RESET);
    CHECK(memmove_s(nullptr, 4, s, 1) == EINVAL);
    CHECK(memmove_s(d, 0, s, 1) == ERANGE);

    std::memset(d, 'x', sizeof d);
    CHECK(memset_s(d, sizeof d, 'a', 4) == EOK && all_bytes(d, 4, 'a') && d[4] == 'x');
    CHECK(memset_s(d, 8, 'b', 9) == ERANGE_AND_RESET && all_bytes(d, 8, 'b') && d[8] == 'x');
    CHECK(memset_s(nullptr, 8, 0, 1) == EINVAL);
    CHECK(memset_s(d, 0, 0, 0) == ERANGE);
    CHECK(memset_s(d, 8, 0, 0) == EOK && d[0] == 'b');
}

void test_securec_str() {
    char d[8];
    CHECK(strcpy_s(d, sizeof d, "hello") == EOK && std::strcmp(d, "hello") == 0);
    CHECK(strcpy_s(d, sizeof d, "1234567") == EOK && std::strcmp(d, "1234567") == 0);  // exactly fits
    CHECK(strcpy_s(d, sizeof d, "12345678") == ERANGE_AND_RESET && d[0] == '\0');
    std::strcpy(d, "abc");
    CHECK(strcpy_s(d, sizeof d, nullptr) == EINVAL_AND_RESET && d[0] == '\0');
    CHECK(strcpy_s(nullptr, 8, "x") == EINVAL);
    std::strcpy(d, "abc");
    CHECK(strcpy_s(d, 0, "x") == ERANGE && d[0] == 'a');
    CHECK(strcpy_s(d, sizeof d, d) == EOK && std::strcmp(d, "abc") == 0);
    char big[32] = "keep it simple";
    CHECK(strcpy_s(big, sizeof big, big + 5) == EOVERLAP_AND_RESET && big[0] == '\0');
    std::strcpy(big, "keep it simple");
    CHECK(strcpy_s(big + 5, 20, big) == EOVERLAP_AND_RESET && big[5] == '\0');

    CHECK(strncpy_s(d, sizeof d, "hello world", 3) == EOK && std::strcmp(d, "hel") == 0);
    CHECK(strncpy_s(d, sizeof d, "hi", 5) == EOK && std::strcmp(d, "hi") == 0);
    CHECK(strncpy_s(d, sizeof d, "hello world", 7) == EOK && std::strcmp(d, "hello w") == 0);
    CHECK(strncpy_s(d, sizeof d, "hello world", 8) == ERANGE_AND_RESET && d[0] == '\0');
    CHECK(strncpy_s(d, sizeof d, "hello", static_cast<size_t>(-1)) == EOK && std::strcmp(d, "hello") == 0);
    CHECK(strncpy_s(d, sizeof d, "hello", 0) == EOK && d[0] == '\0');
    std::strcpy(d, "abc");
    CHECK(strncpy_s(d, sizeof d, nullptr, 2) == EINVAL_AND_RESET && d[0] == '\0');
    CHECK(strncpy_s(nullptr, 8, "a", 1) == EINVAL);
    CHECK(strncpy_s(d, 0, "a", 1) == ERANGE);
    std::strcpy(big, "keep it simple");
    CHECK(strncpy_s(big, sizeof big, big + 2, 5) == EOVERLAP_AND_RESET && big[0] == '\0');

    std::strcpy(d, "ab");
    CHECK(strcat_s(d, sizeof d, "cde") == EOK && std::strcmp(d, "abcde") == 0);
    CHECK(strcat_s(d, sizeof d, "fg") == EOK && std::strcmp(d, "abcdefg") == 0);  // exactly fits
    CHECK(strcat_s(d, sizeof d, "h") == ERANGE_AND_RESET && d[0] == '\0');
    std::memset(d, 'z', sizeof d);  // unterminated destination
    CHECK(strcat_s(d, sizeof d, "a") == EINVAL_AND_RESET && d[0] == '\0');
    std::strcpy(d, "ab");
    CHECK(strcat_s(d, sizeof d, nullptr) == EINVAL_AND_RESET && d[0] == '\0');
    CHECK(strcat_s(nullptr, 8, "a") == EINVAL);
    CHECK(strcat_s(d, 0, "a") == ERANGE);
    std::strcpy(big, "abc");
    CHECK(strcat_s(big, sizeof big, big + 1) == EOVERLAP_AND_RESET && big[0] == '\0');

    std::strcpy(d, "ab");
    CHECK(strncat_s(d, sizeof d, "cdefgh", 2) == EOK && std::strcmp(d, "abcd") == 0);
    CHECK(strncat_s(d, sizeof d, "xyz", 3) == EOK && std::strcmp(d, "abcdxyz") == 0);
    CHECK(strncat_s(d, sizeof d, "q", 1) == ERANGE_AND_RESET && d[0] == '\0');
    std::strcpy(d, "ab");
    CHECK(strncat_s(d, sizeof d, "q", 0) == EOK && std::strcmp(d, "ab") == 0);
    CHECK(strncat_s(d, sizeof d, nullptr, 1) == EINVAL_AND_RESET && d[0] == '\0');
    std::strcpy(d, "ab");
    CHECK(strncat_s(d, sizeof d, "q", static_cast<size_t>(SECUREC_STRING_MAX_LEN) + 1) == ERANGE_AND_RESET && d[0] == '\0');
}

void test_securec_printf() {
    char d[8];
    CHECK(sprintf_s(d, sizeof d, "%d-%s", 42, "ab") == 5 && std::strcmp(d, "42-ab") == 0);
    CHECK(sprintf_s(d, sizeof d, "%s", "1234567") == 7 && std::strcmp(d, "1234567") == 0);
    CHECK(sprintf_s(d, sizeof d, "%s", "12345678") == -1 && d[0] == '\0');  // truncation clears
    std::strcpy(d, "abc");
    CHECK(sprintf_s(d, sizeof d, nullptr) == -1 && d[0] == '\0');
    CHECK(sprintf_s(nullptr, 8, "x") == -1);
    std::strcpy(d, "abc");
    CHECK(sprintf_s(d, 0, "x") == -1 && d[0] == 'a');
    int n = 0;
    CHECK(sprintf_s(d, sizeof d, "a%nb", &n) == -1 && d[0] == '\0' && n == 0);  // %n refused
    CHECK(sprintf_s(d, sizeof d, "100%%") == 4 && std::strcmp(d, "100%") == 0);
    CHECK(call_vsprintf(d, sizeof d, "%c%c", 'x', 'y') == 2 && std::strcmp(d, "xy") == 0);

    char e[16];
    CHECK(snprintf_s(e, sizeof e, 5, "%s", "hello world") == -1 && std::strcmp(e, "hello") == 0);  // count < destMax
    CHECK(snprintf_s(e, sizeof e, 15, "%s", "hello world") == 11 && std::strcmp(e, "hello world") == 0);
    CHECK(snprintf_s(e, 8, 8, "%s", "hello world") == -1 && e[0] == '\0');  // count >= destMax: overflow
    CHECK(snprintf_s(e, 8, 20, "%s", "hello") == 5 && std::strcmp(e, "hello") == 0);
    CHECK(snprintf_s(e, sizeof e, static_cast<size_t>(-1), "%d", 7) == 1 && std::strcmp(e, "7") == 0);
    CHECK(snprintf_s(e, sizeof e, 0, "%s", "x") == -1 && e[0] == '\0');
    std::strcpy(e, "abc");
    CHECK(snprintf_s(e, sizeof e, 4, nullptr) == -1 && e[0] == '\0');
    CHECK(snprintf_s(nullptr, 8, 4, "x") == -1);
    CHECK(snprintf_s(e, 0, 4, "x") == -1);
    std::strcpy(e, "abc");
    CHECK(snprintf_s(e, sizeof e, static_cast<size_t>(SECUREC_STRING_MAX_LEN), "x") == -1 && e[0] == '\0');
    CHECK(call_vsnprintf(e, sizeof e, 3, "%d", 123456) == -1 && std::strcmp(e, "123") == 0);
    CHECK(call_vsnprintf(e, sizeof e, 10, "%.2f", 1.5) == 4 && std::strcmp(e, "1.50") == 0);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1) {
        g_scratch = argv[1];
    } else if (const char* t = std::getenv("TMPDIR")) {
        g_scratch = t;
    }
    test_json_valid();
    test_json_strings();
    test_json_errors();
    test_json_depth();
    test_json_read_file();
    test_half_conversions();
    test_bf16_conversions();
    test_reduce_tables();
    // Both kernel families: the best one for this CPU, then the portable one.
    for (bool portable : {false, true}) {
        emu::reduce_force_portable(portable);
        std::printf("reduce kernels: %s\n", emu::reduce_isa());
        test_reduce_matrix();
        test_reduce_edge_cases();
        test_reduce_threads();
    }
    emu::reduce_force_portable(false);
    test_securec_mem();
    test_securec_str();
    test_securec_printf();
    std::printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
