// Strict RFC 8259 JSON reader; see json.h for the accepted language.
#include "base/json.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <system_error>
#include <unordered_map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace emu {
namespace json {

const Value* Value::get(const std::string& key) const {
    if (type != Type::Object) return nullptr;
    for (auto it = obj.rbegin(); it != obj.rend(); ++it) {  // keys are unique (parse rejects repeats)
        if (it->first == key) return &it->second;
    }
    return nullptr;
}

bool Value::is_integer() const {
    if (type != Type::Number || !std::isfinite(num)) return false;
    if (std::trunc(num) != num) return false;
    return num >= -9223372036854775808.0 && num < 9223372036854775808.0;
}

const char* Value::type_name() const {
    switch (type) {
        case Type::Null: return "null";
        case Type::Bool: return "bool";
        case Type::Number: return "number";
        case Type::String: return "string";
        case Type::Array: return "array";
        case Type::Object: return "object";
    }
    return "?";
}

namespace {

class Parser {
public:
    Parser(const char* begin, const char* end) : p_(begin), end_(end) {
        // An optional UTF-8 byte order mark is skipped (RFC 8259 §8.1 allows ignoring it).
        if (end_ - p_ >= 3 && static_cast<unsigned char>(p_[0]) == 0xEF &&
            static_cast<unsigned char>(p_[1]) == 0xBB && static_cast<unsigned char>(p_[2]) == 0xBF) {
            p_ += 3;
            text_start_ = p_;
        } else {
            text_start_ = begin;
        }
    }

    bool document(Value& v) {
        if (!value(v, 0)) return false;
        skip_ws();
        if (p_ != end_) return fail(p_, "unexpected " + describe(p_) + " after the end of the document");
        return true;
    }

    // "line L, column C: reason" for the recorded failure.
    std::string message() const { return position(err_pos_) + ": " + reason_; }

private:
    // "line L, column C" of the byte at `at`.
    std::string position(const char* at) const {
        long line = 1, col = 1;
        for (const char* q = text_start_; q < at && q < end_; ++q) {
            unsigned char c = static_cast<unsigned char>(*q);
            if (c == '\n') {
                ++line;
                col = 1;
            } else if ((c & 0xC0) != 0x80) {  // count code points, not continuation bytes
                ++col;
            }
        }
        return "line " + std::to_string(line) + ", column " + std::to_string(col);
    }

    const char* text_start_;  // first byte after an optional BOM; column counting starts here
    const char* p_;
    const char* end_;
    const char* err_pos_ = nullptr;
    std::string reason_;

    bool fail(const char* at, std::string reason) {
        err_pos_ = at;
        reason_ = std::move(reason);
        return false;
    }

    std::string describe(const char* at) const {
        if (at >= end_) return "end of input";
        unsigned char c = static_cast<unsigned char>(*at);
        char buf[32];
        if (c >= 0x21 && c < 0x7F) {
            std::snprintf(buf, sizeof buf, "character '%c'", c);
        } else {
            std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
        }
        return buf;
    }

    void skip_ws() {
        while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
    }

    bool value(Value& v, int depth) {
        skip_ws();
        if (p_ == end_) return fail(p_, "unexpected end of input, expected a value");
        switch (*p_) {
            case '{': return object(v, depth + 1);
            case '[': return array(v, depth + 1);
            case '"':
                v.type = Value::Type::String;
                return string(v.str);
            case 't': return literal(v, "true", Value::Type::Bool, true);
            case 'f': return literal(v, "false", Value::Type::Bool, false);
            case 'n': return literal(v, "null", Value::Type::Null, false);
            default:
                if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return number(v);
                return fail(p_, "unexpected " + describe(p_) + ", expected a value");
        }
    }

    bool literal(Value& v, const char* word, Value::Type type, bool b) {
        const char* start = p_;
        for (const char* w = word; *w; ++w, ++p_) {
            if (p_ == end_ || *p_ != *w) return fail(start, std::string("invalid literal (expected '") + word + "')");
        }
        v.type = type;
        v.b = b;
        return true;
    }

    bool array(Value& v, int depth) {
        if (depth > kMaxDepth) return fail(p_, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
        v.type = Value::Type::Array;
        ++p_;  // '['
        skip_ws();
        if (p_ < end_ && *p_ == ']') {
            ++p_;
            return true;
        }
        for (;;) {
            skip_ws();
            if (p_ < end_ && *p_ == ']') return fail(p_, "trailing comma before ']'");
            v.arr.emplace_back();
            if (!value(v.arr.back(), depth)) return false;
            skip_ws();
            if (p_ == end_) return fail(p_, "unexpected end of input, expected ',' or ']'");
            if (*p_ == ',') {
                ++p_;
                continue;
            }
            if (*p_ == ']') {
                ++p_;
                return true;
            }
            return fail(p_, "unexpected " + describe(p_) + ", expected ',' or ']'");
        }
    }

    bool object(Value& v, int depth) {
        if (depth > kMaxDepth) return fail(p_, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
        v.type = Value::Type::Object;
        ++p_;  // '{'
        skip_ws();
        if (p_ < end_ && *p_ == '}') {
            ++p_;
            return true;
        }
        std::vector<const char*> key_pos;                 // where each member's key starts
        std::unordered_map<std::string, size_t> seen;     // key -> member index, for large objects
        for (;;) {
            skip_ws();
            if (p_ == end_) return fail(p_, "unexpected end of input, expected a string key");
            if (*p_ == '}') return fail(p_, "trailing comma before '}'");
            if (*p_ != '"') return fail(p_, "unexpected " + describe(p_) + ", expected a string key");
            const char* key_at = p_;
            v.obj.emplace_back();
            if (!string(v.obj.back().first)) return false;
            if (!unique_key(v, key_at, key_pos, seen)) return false;
            skip_ws();
            if (p_ == end_) return fail(p_, "unexpected end of input, expected ':'");
            if (*p_ != ':') return fail(p_, "unexpected " + describe(p_) + ", expected ':'");
            ++p_;
            if (!value(v.obj.back().second, depth)) return false;
            skip_ws();
            if (p_ == end_) return fail(p_, "unexpected end of input, expected ',' or '}'");
            if (*p_ == ',') {
                ++p_;
                continue;
            }
            if (*p_ == '}') {
                ++p_;
                return true;
            }
            return fail(p_, "unexpected " + describe(p_) + ", expected ',' or '}'");
        }
    }

    // The key just parsed (last member of v, starting at key_at) must not repeat an earlier one.
    // Small objects are scanned; from kIndexFrom members on, a hash index is kept.
    static constexpr size_t kIndexFrom = 16;
    bool unique_key(const Value& v, const char* key_at, std::vector<const char*>& key_pos,
                    std::unordered_map<std::string, size_t>& seen) {
        const std::string& key = v.obj.back().first;
        size_t idx = v.obj.size() - 1, first = SIZE_MAX;
        key_pos.push_back(key_at);
        if (idx < kIndexFrom) {
            for (size_t i = 0; i < idx; ++i)
                if (v.obj[i].first == key) {
                    first = i;
                    break;
                }
            if (first == SIZE_MAX && idx + 1 == kIndexFrom)
                for (size_t i = 0; i <= idx; ++i) seen.emplace(v.obj[i].first, i);
        } else {
            auto ins = seen.emplace(key, idx);
            if (!ins.second) first = ins.first->second;
        }
        if (first == SIZE_MAX) return true;
        std::string shown = key.size() > 64 ? key.substr(0, 64) + "..." : key;
        for (char& c : shown)
            if (static_cast<unsigned char>(c) < 0x20) c = '?';
        return fail(key_at, "duplicate key \"" + shown + "\" (first at " + position(key_pos[first]) +
                                "); each key may appear once per object");
    }

    static void put_utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    // Reads the 4 hex digits of a \u escape; p_ points at the 'u'. Advances past them.
    bool hex4(const char* esc, uint32_t& cp) {
        ++p_;  // 'u'
        cp = 0;
        for (int i = 0; i < 4; ++i, ++p_) {
            if (p_ == end_) return fail(p_, "unexpected end of input in \\u escape");
            char c = *p_;
            uint32_t d;
            if (c >= '0' && c <= '9') {
                d = static_cast<uint32_t>(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                d = static_cast<uint32_t>(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                d = static_cast<uint32_t>(c - 'A' + 10);
            } else {
                return fail(esc, "invalid \\u escape (expected 4 hex digits)");
            }
            cp = cp << 4 | d;
        }
        return true;
    }

    // Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0 if invalid.
    size_t utf8_len(const char* p) const {
        auto at = [&](ptrdiff_t i) -> int {
            return p + i < end_ ? static_cast<unsigned char>(p[i]) : -1;
        };
        auto cont = [](int c, int lo, int hi) { return c >= lo && c <= hi; };
        int c0 = at(0);
        if (c0 >= 0xC2 && c0 <= 0xDF) return cont(at(1), 0x80, 0xBF) ? 2 : 0;
        if (c0 >= 0xE0 && c0 <= 0xEF) {
            int lo = c0 == 0xE0 ? 0xA0 : 0x80, hi = c0 == 0xED ? 0x9F : 0xBF;  // no overlongs, no surrogates
            return cont(at(1), lo, hi) && cont(at(2), 0x80, 0xBF) ? 3 : 0;
        }
        if (c0 >= 0xF0 && c0 <= 0xF4) {
            int lo = c0 == 0xF0 ? 0x90 : 0x80, hi = c0 == 0xF4 ? 0x8F : 0xBF;  // <= U+10FFFF
            return cont(at(1), lo, hi) && cont(at(2), 0x80, 0xBF) && cont(at(3), 0x80, 0xBF) ? 4 : 0;
        }
        return 0;
    }

    // p_ points at the opening quote.
    bool string(std::string& out) {
        ++p_;  // opening quote
        for (;;) {
            // Copy the run of plain characters in one go.
            const char* run = p_;
            while (p_ < end_) {
                unsigned char c = static_cast<unsigned char>(*p_);
                if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
                ++p_;
            }
            out.append(run, static_cast<size_t>(p_ - run));
            if (p_ == end_) return fail(p_, "unexpected end of input in string");
            unsigned char c = static_cast<unsigned char>(*p_);
            if (c == '"') {
                ++p_;
                return true;
            }
            if (c < 0x20) {
                char buf[64];
                std::snprintf(buf, sizeof buf, "unescaped control character U+%04X in string", c);
                return fail(p_, buf);
            }
            if (c >= 0x80) {
                size_t n = utf8_len(p_);
                if (n == 0) {
                    char buf[64];
                    std::snprintf(buf, sizeof buf, "invalid UTF-8 byte 0x%02X in string", c);
                    return fail(p_, buf);
                }
                out.append(p_, n);
                p_ += n;
                continue;
            }
            // Backslash escape.
            const char* esc = p_;
            ++p_;
            if (p_ == end_) return fail(p_, "unexpected end of input in string");
            switch (*p_) {
                case '"': out += '"'; ++p_; break;
                case '\\': out += '\\'; ++p_; break;
                case '/': out += '/'; ++p_; break;
                case 'b': out += '\b'; ++p_; break;
                case 'f': out += '\f'; ++p_; break;
                case 'n': out += '\n'; ++p_; break;
                case 'r': out += '\r'; ++p_; break;
                case 't': out += '\t'; ++p_; break;
                case 'u': {
                    uint32_t cp;
                    if (!hex4(esc, cp)) return false;
                    if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(esc, "unpaired low surrogate in \\u escape");
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        const char* esc2 = p_;
                        if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
                            return fail(esc, "high surrogate in \\u escape not followed by a low surrogate");
                        }
                        ++p_;
                        uint32_t lo;
                        if (!hex4(esc2, lo)) return false;
                        if (lo < 0xDC00 || lo > 0xDFFF) {
                            return fail(esc, "high surrogate in \\u escape not followed by a low surrogate");
                        }
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    put_utf8(out, cp);
                    break;
                }
                default:
                    return fail(esc, "invalid escape '\\" + std::string(1, *p_) + "' in string");
            }
        }
    }

    static bool is_digit(char c) { return c >= '0' && c <= '9'; }

    bool number(Value& v) {
        const char* start = p_;
        bool neg = false;
        if (*p_ == '-') {
            neg = true;
            ++p_;
        }
        if (p_ == end_ || !is_digit(*p_)) return fail(p_, "invalid number: expected a digit after '-'");
        const char* int_begin = p_;
        if (*p_ == '0') {
            ++p_;
            if (p_ < end_ && is_digit(*p_)) return fail(start, "invalid number: leading zeros are not allowed");
        } else {
            while (p_ < end_ && is_digit(*p_)) ++p_;
        }
        const char* int_end = p_;
        const char* frac_begin = p_;
        const char* frac_end = p_;
        if (p_ < end_ && *p_ == '.') {
            ++p_;
            if (p_ == end_ || !is_digit(*p_)) return fail(p_, "invalid number: expected a digit after '.'");
            frac_begin = p_;
            while (p_ < end_ && is_digit(*p_)) ++p_;
            frac_end = p_;
        }
        long long exp10 = 0;
        if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
            ++p_;
            bool eneg = false;
            if (p_ < end_ && (*p_ == '+' || *p_ == '-')) {
                eneg = *p_ == '-';
                ++p_;
            }
            if (p_ == end_ || !is_digit(*p_)) return fail(p_, "invalid number: expected a digit in the exponent");
            while (p_ < end_ && is_digit(*p_)) {
                if (exp10 < 100000000) exp10 = exp10 * 10 + (*p_ - '0');  // saturate
                ++p_;
            }
            if (eneg) exp10 = -exp10;
        }
        double d = 0;
        auto res = std::from_chars(start, p_, d, std::chars_format::general);
        if (res.ec == std::errc::result_out_of_range || (res.ec == std::errc() && std::isinf(d))) {
            // Decide overflow vs underflow from the decimal magnitude of the first nonzero digit.
            long long mag = 0;
            bool found = false;
            for (const char* q = int_begin; q < int_end; ++q) {
                if (*q != '0') {
                    mag = int_end - q;  // digits before the point, counting from the first nonzero
                    found = true;
                    break;
                }
            }
            if (!found) {
                for (const char* q = frac_begin; q < frac_end; ++q) {
                    if (*q != '0') {
                        mag = -(q - frac_begin);
                        break;
                    }
                }
            }
            if (mag + exp10 > 0) return fail(start, "number out of range for a double");
            d = neg ? -0.0 : 0.0;
        } else if (res.ec != std::errc() || res.ptr != p_) {
            return fail(start, "invalid number");
        }
        v.type = Value::Type::Number;
        v.num = d;
        return true;
    }
};

}  // namespace

bool parse(const std::string& text, Value& out, std::string& err) {
    Value v;
    Parser parser(text.data(), text.data() + text.size());
    if (!parser.document(v)) {
        out = Value();
        err = parser.message();
        return false;
    }
    out = std::move(v);
    return true;
}

bool read_file(const std::string& path, std::string& text, std::string& err, ReadStatus* status,
               size_t max_bytes) {
    auto failure = [&](ReadStatus st, const std::string& why) {
        err = "cannot read '" + path + "': " + why;
        if (status) *status = st;
        return false;
    };
    auto errno_text = [](int e) { return std::error_code(e, std::generic_category()).message(); };
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below anyway). */
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return failure(ReadStatus::Open, errno_text(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        return failure(ReadStatus::Open, errno_text(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "not a regular file";
        return failure(ReadStatus::NotRegular,
                       std::string("it is ") + what + "; only regular files (or symlinks to one) are read");
    }
    auto too_large = [&](const std::string& size) {
        ::close(fd);
        return failure(ReadStatus::TooLarge, "the file is " + size + " bytes, above the limit of " +
                                                 std::to_string(max_bytes) + " bytes (" +
                                                 std::to_string(max_bytes >> 20) + " MiB)");
    };
    if (st.st_size < 0 || static_cast<unsigned long long>(st.st_size) > max_bytes)
        return too_large(std::to_string(static_cast<long long>(st.st_size)));
    std::string buf;
    buf.reserve(static_cast<size_t>(st.st_size));
    char chunk[65536];
    for (;;) {
        /* Read at most one byte past the limit: a file that grew meanwhile is refused, not read whole. */
        size_t want = std::min(sizeof chunk, max_bytes + 1 - buf.size());
        ssize_t n = ::read(fd, chunk, want);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            ::close(fd);
            return failure(ReadStatus::Read, errno_text(e));
        }
        if (n == 0) break;
        buf.append(chunk, static_cast<size_t>(n));
        if (buf.size() > max_bytes) return too_large("more than " + std::to_string(max_bytes));
    }
    ::close(fd);
    text = std::move(buf);
    if (status) *status = ReadStatus::Ok;
    return true;
}

}  // namespace json
}  // namespace emu
