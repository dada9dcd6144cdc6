// Strict RFC 8259 JSON reader used for op-info and rank-table files.
//
// Accepted: objects, arrays, strings (all escapes, \uXXXX incl. surrogate pairs -> UTF-8),
// numbers (JSON grammar only), true/false/null, an optional leading UTF-8 BOM, and
// whitespace (space, tab, LF, CR). Rejected with a "line L, column C: reason" message:
// everything else (comments, trailing commas, single quotes, NaN/Infinity, leading zeros,
// raw control characters or invalid UTF-8 inside strings, lone surrogates, trailing
// garbage, nesting deeper than kMaxDepth, an object with the same key twice). Columns count
// characters (UTF-8 code points), starting at 1. Numbers whose magnitude overflows a double are
// an error; numbers that underflow become (signed) zero.
//
// Files (read_file): only regular files (or symlinks to one) of at most kMaxFileBytes are read;
// FIFOs, devices (/dev/zero), sockets and directories are refused without blocking.
#ifndef HCOMM_EMU_JSON_H
#define HCOMM_EMU_JSON_H

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace emu {
namespace json {

// Maximum nesting of arrays/objects. A document nested deeper is rejected.
constexpr int kMaxDepth = 64;

// Largest file read_file accepts: 4 MiB. Op-info JSONs and rank tables are a few KB (CANN's own
// op-info file for ~1000 AICPU ops is under 1 MiB); anything larger is refused, not read.
constexpr size_t kMaxFileBytes = 4u << 20;

struct Value {
    enum class Type { Null, Bool, Number, String, Array, Object };
    Type type = Type::Null;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<Value> arr;
    // Members in file order (keys are unique: parse() rejects a repeated key).
    std::vector<std::pair<std::string, Value>> obj;

    // Member `key` of an object; nullptr if this is not an object or the key is missing.
    const Value* get(const std::string& key) const;

    bool is_null() const { return type == Type::Null; }
    bool is_bool() const { return type == Type::Bool; }
    bool is_number() const { return type == Type::Number; }
    bool is_string() const { return type == Type::String; }
    bool is_array() const { return type == Type::Array; }
    bool is_object() const { return type == Type::Object; }
    // True if this is a number with an integral value that fits in int64_t.
    bool is_integer() const;

    // "null", "bool", "number", "string", "array" or "object" (for error messages).
    const char* type_name() const;
};

// Parses `text` as one JSON document. On success returns true and fills `out` (err untouched).
// On failure returns false, leaves `out` null, and sets err = "line L, column C: <reason>".
bool parse(const std::string& text, Value& out, std::string& err);

// Why read_file failed.
enum class ReadStatus { Ok, Open, NotRegular, TooLarge, Read };

// Reads the whole file at `path` into `text`: a regular file (symlinks followed) of at most
// `max_bytes` bytes. Never blocks on a FIFO and never reads a device. On failure returns false,
// sets err to "cannot read '<path>': <reason>" and, if `status` is given, why.
bool read_file(const std::string& path, std::string& text, std::string& err, ReadStatus* status = nullptr,
               size_t max_bytes = kMaxFileBytes);

}  // namespace json
}  // namespace emu

#endif  // HCOMM_EMU_JSON_H
