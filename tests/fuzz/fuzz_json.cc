/* Fuzz target: the JSON reader (emu::json::parse / read_file) and the op-info loader
 * (aclrtBinaryLoadFromFile on the text written to a file).
 *
 * Input: one mode byte, then the document text.
 *   mode bit 0: also load the text as an op-info JSON (cpuKernelMode 1);
 *   mode bit 1: also write it to a file and read it back with read_file under a size limit of
 *               (mode >> 2) * 16 bytes (0 = the default 4 MiB limit).
 * Guarantees checked: parse() succeeds with an empty error, or fails with "line L, column C: ..."
 * and a null value; accepted documents nest at most kMaxDepth deep and have no repeated key in any
 * object; the loader never succeeds (there is no .so) and fails with one of the loader's codes,
 * PARSE_FILE exactly when parse() failed; read_file returns the exact bytes or TooLarge exactly
 * when the text is above the limit. */
#include "fuzz_common.h"
#include "base/json.h"

#include <set>
#include <sys/stat.h>
#include <string>

namespace {

struct Env {
    std::string dir;
    std::string json_path;
};

Env& env() {
    static Env* e = [] {
        auto* x = new Env();
        const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        x->dir = std::string(base) + "/hcomm_kit_fuzz_json." + std::to_string(getpid());
        mkdir(x->dir.c_str(), 0700);
        x->json_path = x->dir + "/op.json";
        FUZZ_SETUP(aclInit(nullptr));
        atexit([] {
            unlink(env().json_path.c_str());
            rmdir(env().dir.c_str());
        });
        return x;
    }();
    return *e;
}

void check_tree(const emu::json::Value& v, int depth) {
    using T = emu::json::Value::Type;
    FUZZ_ASSERT(depth <= emu::json::kMaxDepth, "accepted a document nested %d deep", depth);
    if (v.type == T::Array) {
        for (const auto& x : v.arr) check_tree(x, depth + 1);
    } else if (v.type == T::Object) {
        std::set<std::string> keys;
        for (const auto& kv : v.obj) {
            FUZZ_ASSERT(keys.insert(kv.first).second, "accepted a repeated key \"%s\"", kv.first.c_str());
            check_tree(kv.second, depth + 1);
        }
    } else if (v.type == T::Number) {
        FUZZ_ASSERT(v.num == v.num, "parsed a NaN");
    }
}

bool write_file(const std::string& path, const std::string& text) {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f) return false;
    bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
    return fclose(f) == 0 && ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Env& e = env();
    if (size == 0) return 0;
    uint8_t mode = data[0];
    std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

    emu::json::Value v;
    std::string err;
    bool ok = emu::json::parse(text, v, err);
    if (ok) {
        FUZZ_ASSERT(err.empty(), "success with an error text: %s", err.c_str());
        check_tree(v, 0);
    } else {
        FUZZ_ASSERT(err.rfind("line ", 0) == 0 && err.find(", column ") != std::string::npos,
                    "error text without a position: %s", err.c_str());
        FUZZ_ASSERT(v.is_null(), "a failed parse left a value behind");
    }

    if (mode & 3) {
        if (!write_file(e.json_path, text)) return 0;
    }
    if (mode & 1) {
        clear_error();
        aclrtBinaryLoadOption opt;
        memset(&opt, 0, sizeof opt);
        opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
        opt.value.cpuKernelMode = 1;
        aclrtBinaryLoadOptions opts = {&opt, 1};
        aclrtBinHandle h = nullptr;
        int rc = aclrtBinaryLoadFromFile(e.json_path.c_str(), &opts, &h);
        if (rc == ACL_SUCCESS) aclrtBinaryUnLoad(h);
        FUZZ_ASSERT(rc != ACL_SUCCESS, "loaded an op-info JSON whose .so does not exist");
        FUZZ_ASSERT(rc == ACL_ERROR_PARSE_FILE || rc == ACL_ERROR_FILE_MISSING_ATTR || rc == ACL_ERROR_FILE_ATTR_INVALID ||
                        rc == ACL_ERROR_RT_FILE_OPEN || rc == ACL_ERROR_INVALID_FILE_SIZE,
                    "unexpected code %d", rc);
        FUZZ_ASSERT(ok || rc == ACL_ERROR_PARSE_FILE, "parse failed but the loader returned %d", rc);
        const char* msg = aclGetRecentErrMsg();
        FUZZ_ASSERT(msg && strstr(msg, "op.json"), "error %d without a message naming the file", rc);
    }
    if (mode & 2) {
        size_t limit = (mode >> 2) ? static_cast<size_t>(mode >> 2) * 16 : emu::json::kMaxFileBytes;
        std::string back, rerr;
        emu::json::ReadStatus st = emu::json::ReadStatus::Ok;
        bool rok = emu::json::read_file(e.json_path, back, rerr, &st, limit);
        if (text.size() > limit) {
            FUZZ_ASSERT(!rok && st == emu::json::ReadStatus::TooLarge, "read %zu bytes past a limit of %zu", text.size(),
                        limit);
        } else {
            FUZZ_ASSERT(rok && st == emu::json::ReadStatus::Ok && back == text, "read_file lost data: %s", rerr.c_str());
        }
    }
    return 0;
}
