/* The timing model's parameters: model_params.json beside the library (written at build time from
 * model/params/<product>.toml by hcomm_kit/build/emulator.py, the one source), or the JSON file
 * HCOMM_KIT_MODEL_PARAMS names. Read once per process. */
#include "base/json.h"
#include "base/reduce.h"
#include "model/model.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>

namespace emu {

double ModelParams::reduce_bw(int dtype) const {
    for (auto& d : reduce_dtype)
        if (d.first == dtype) return d.second;
    return reduce;
}

bool model_logging() {
    static const bool on = [] {
        const char* v = getenv("HCOMM_KIT_MODEL");
        return !(v && !strcmp(v, "0"));
    }();
    return on;
}

namespace {

std::string params_path() {
    const char* env = getenv("HCOMM_KIT_MODEL_PARAMS");
    if (env && *env) return env;
    Dl_info info;
    if (!dladdr(reinterpret_cast<void*>(&params_path), &info) || !info.dli_fname) return "model_params.json";
    char real[PATH_MAX];
    std::string lib = realpath(info.dli_fname, real) ? real : info.dli_fname;
    size_t k = lib.rfind('/');
    return (k == std::string::npos ? std::string(".") : lib.substr(0, k)) + "/model_params.json";
}

bool num(const json::Value& o, const char* key, double* out, std::string* err, const std::string& where,
         bool positive = true) {
    const json::Value* v = o.get(key);
    if (!v || !v->is_number() || (positive ? v->num <= 0 : v->num < 0)) {
        *err = strprintf("%s: '%s' must be a %s number", where.c_str(), key, positive ? "positive" : "non-negative");
        return false;
    }
    *out = v->num;
    return true;
}

int dtype_by_name(const std::string& name) {
    for (int d = 0; d < 64; d++) {
        const char* n = dtype_name(d);
        if (n && name == n) return d;
    }
    return -1;
}

bool parse_product(const json::Value& v, const std::string& file, ModelParams* p, std::string* err) {
    std::string w = file + " [" + p->product + "]";
    if (!v.is_object()) {
        *err = w + ": not an object";
        return false;
    }
    if (const json::Value* f = v.get("file")) p->file = f->is_string() ? f->str : file;
    if (!num(v, "task_us", &p->task_us, err, w, false) || !num(v, "launch_us", &p->launch_us, err, w, false) ||
        !num(v, "thread_notify_us", &p->thread_notify_us, err, w, false))
        return false;
    double copy, reduce;
    if (!num(v, "copy_GBps", &copy, err, w) || !num(v, "reduce_GBps", &reduce, err, w)) return false;
    p->copy = copy * 1e3;
    p->reduce = reduce * 1e3;
    if (const json::Value* rd = v.get("reduce_GBps_by_dtype")) {
        for (auto& kv : rd->obj) {
            int d = dtype_by_name(kv.first);
            if (d < 0 || !kv.second.is_number() || kv.second.num <= 0) {
                *err = w + ": reduce_GBps_by_dtype." + kv.first + ": unknown dtype or not a positive number";
                return false;
            }
            p->reduce_dtype.emplace_back(d, kv.second.num * 1e3);
        }
    }
    const json::Value* links = v.get("links");
    if (!links || !links->is_object()) {
        *err = w + ": 'links' missing";
        return false;
    }
    const char* names[4] = {nullptr, "HCCS", "UB", "RoCE"};
    for (int t = 1; t < 4; t++) {
        const json::Value* l = links->get(names[t]);
        if (!l) {
            *err = strprintf("%s: links.%s missing", w.c_str(), names[t]);
            return false;
        }
        LinkParams& lp = p->link[t];
        std::string lw = w + " links." + names[t];
        double wr, rd, link, port = 0;
        if (!num(*l, "latency_us", &lp.latency_us, err, lw, false) ||
            !num(*l, "notify_us", &lp.notify_us, err, lw, false) || !num(*l, "write_GBps", &wr, err, lw) ||
            !num(*l, "read_GBps", &rd, err, lw) ||
            !num(*l, "link_GBps", &link, err, lw) || !num(*l, "port_GBps", &port, err, lw, false))
            return false;
        lp.write = wr * 1e3;
        lp.read = rd * 1e3;
        lp.link = link * 1e3;
        lp.port = port * 1e3;
    }
    return true;
}

}  // namespace

const ModelParams* model_params(const std::string& product, std::string* err) {
    static std::mutex m;
    static std::map<std::string, ModelParams>* cache = new std::map<std::string, ModelParams>();
    static std::string load_err;
    static bool loaded = false;
    static json::Value* doc = new json::Value();
    static std::string file;
    std::lock_guard<std::mutex> g(m);
    auto it = cache->find(product);
    if (it != cache->end()) return &it->second;
    if (!loaded) {
        loaded = true;
        file = params_path();
        std::string text, e;
        if (!json::read_file(file, text, e)) load_err = e + " (the timing model's parameters; set HCOMM_KIT_MODEL_PARAMS)";
        else if (!json::parse(text, *doc, e)) load_err = file + ": " + e;
    }
    if (!load_err.empty()) {
        *err = load_err;
        return nullptr;
    }
    const json::Value* v = doc->get(product);
    if (!v) {
        *err = strprintf("%s has no parameters for product %s (add model/params/%s.toml)", file.c_str(),
                         product.c_str(), product.c_str());
        return nullptr;
    }
    ModelParams p;
    p.product = product;
    if (!parse_product(*v, file, &p, err)) return nullptr;
    return &cache->emplace(product, std::move(p)).first->second;
}

}  // namespace emu
