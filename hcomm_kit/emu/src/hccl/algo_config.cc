/* HCCL host plane: HCCL_ALGO, both of CANN's grammars (its executor grammar of alg_parse.cc and the
 * documented level form), parsed and applied to the registered algorithms of a collective (see
 * algo_select.h). Line numbers cited below are of hicann/hccl at 09300b70. */
#include "hccl/algo_select.h"

#include "base/json.h"
#include "hccl/comm.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>

namespace emu {

namespace {

/* The names of CANN's alg_parse.cc: user keys and the Pascal-case pieces algorithm names are
 * composed of (ENGINE_TYPES, OP_TYPES, EXECUTOR_TYPES, ALGO_TYPES). */
const std::map<std::string, std::string>& op_types() {
    static const std::map<std::string, std::string> m = {
        {"allgather", "AllGather"},   {"allgatherv", "AllGatherV"},         {"allreduce", "AllReduce"},
        {"alltoall", "AllToAll"},     {"alltoallv", "AllToAllV"},           {"alltoallvc", "AllToAllVC"},
        {"broadcast", "Broadcast"},   {"reduce", "Reduce"},                 {"reducescatter", "ReduceScatter"},
        {"reducescatterv", "ReduceScatterV"}, {"scatter", "Scatter"}};
    return m;
}
const std::map<std::string, std::string>& executor_types() {
    static const std::map<std::string, std::string> m = {
        {"sole", "Sole"},         {"sequence", "Sequence"}, {"parallel", "Parallel"},
        {"pipeline", "PipeLine"}, {"concur", "Concur"},     {"strictordered", "StrictOrdered"}};
    return m;
}
const std::map<std::string, std::string>& algo_types() {
    static const std::map<std::string, std::string> m = {
        {"mesh", "Mesh"},
        {"mesh2die", "Mesh2Die"},
        {"meshoneshot", "MeshOneShot"},
        {"meshtwoshot", "MeshTwoShot"},
        {"meshconcur", "MeshConcur"},
        {"meshmultilink", "MeshMultiLink"},
        {"meshchunk", "MeshChunk"},
        {"meshchunktwoshot", "MeshChunkTwoShot"},
        {"nhr", "NHR"},
        {"nhrmultilink", "NHRMultiLink"},
        {"nhraicpureduce", "NHRAicpuReduce"},
        {"nhrsinglechannel", "MeshSingleChannel"}, /* sic: alg_parse.cc:51 */
        {"meshconcurrent", "MeshConcurrent"}};
    return m;
}

/* Our collective -> alg_parse.cc's OP_TYPES key ("" when the grammar cannot name it). */
std::string op_key(int coll) {
    switch (coll) {
        case HCCL_CMD_ALLREDUCE: return "allreduce";
        case HCCL_CMD_ALLGATHER: return "allgather";
        case HCCL_CMD_ALLGATHER_V: return "allgatherv";
        case HCCL_CMD_REDUCE_SCATTER: return "reducescatter";
        case HCCL_CMD_REDUCE_SCATTER_V: return "reducescatterv";
        case HCCL_CMD_ALLTOALL: return "alltoall";
        case HCCL_CMD_ALLTOALLV: return "alltoallv";
        case HCCL_CMD_ALLTOALLVC: return "alltoallvc";
        case HCCL_CMD_BROADCAST: return "broadcast";
        case HCCL_CMD_REDUCE: return "reduce";
        case HCCL_CMD_SCATTER: return "scatter";
        default: return "";
    }
}

/* UnderscoreToCamelCase, lowered: "mesh_one_shot" -> "meshoneshot". */
std::string tpl_key(const std::string& name) {
    std::string s;
    for (char ch : name)
        if (ch != '_') s += (char)std::tolower((unsigned char)ch);
    return s;
}

/* A recursive-descent reader of the executor grammar (alg_parse.cc:89-394):
 *   rules    := segment (';' segment)*
 *   segment  := [op ':'] ('not' '(' unit ')' | unit)
 *   unit     := executor '{' [item (',' item)*] '}' | template       (template = sole{template})
 *   item     := ['levelN' '='] ('not' '(' template ')' | template)                              */
struct Reader {
    const std::string& s;
    size_t pos = 0;
    std::string err;
    explicit Reader(const std::string& text) : s(text) {}
    void ws() {
        while (pos < s.size() && std::isspace((unsigned char)s[pos])) pos++;
    }
    bool eat(char c) {
        ws();
        if (pos < s.size() && s[pos] == c) {
            pos++;
            return true;
        }
        return false;
    }
    bool ident(std::string* out) {
        ws();
        size_t b = pos;
        while (pos < s.size() && (std::isalnum((unsigned char)s[pos]) || s[pos] == '_' || s[pos] == '-')) pos++;
        if (pos == b) return false;
        *out = s.substr(b, pos - b);
        return true;
    }
    bool fail(const std::string& what) {
        if (err.empty()) err = strprintf("at character %zu: %s", pos + 1, what.c_str());
        return false;
    }
    bool tpl(std::string* key) {
        std::string name;
        if (!ident(&name)) return fail("expected a template (mesh, meshoneshot, meshtwoshot, nhr, ...)");
        *key = tpl_key(name);
        if (!algo_types().count(*key)) return fail("'" + name + "' is not one of CANN's templates");
        return true;
    }
    bool item(AlgoRule* r, std::vector<std::pair<uint32_t, std::pair<std::string, bool>>>* slots, uint32_t next) {
        size_t save = pos;
        std::string name;
        uint32_t level = next;
        if (ident(&name)) {
            std::string l = algo_lower(name);
            if (l.size() > 5 && l.compare(0, 5, "level") == 0 &&
                std::all_of(l.begin() + 5, l.end(), [](char c) { return std::isdigit((unsigned char)c); }) && eat('=')) {
                if (l.size() > 7) return fail("level " + l.substr(5) + " is out of range");
                level = (uint32_t)std::stoul(l.substr(5));
            } else {
                pos = save;
            }
        }
        bool on = true;
        save = pos;
        if (ident(&name) && algo_lower(name) == "not" && eat('(')) {
            on = false;
        } else {
            pos = save;
        }
        std::string key;
        if (!tpl(&key)) return false;
        if (!on && !eat(')')) return fail("expected ')' after not(template");
        slots->push_back({level, {key, on}});
        (void)r;
        return true;
    }
    bool unit(AlgoRule* r) {
        std::string name;
        if (!ident(&name)) return fail("expected an executor (sole, sequence, parallel, ...) or a template");
        if (eat('{')) {
            r->executor = algo_lower(name);
            if (!executor_types().count(r->executor)) return fail("'" + name + "' is not one of CANN's executors");
            std::vector<std::pair<uint32_t, std::pair<std::string, bool>>> slots;
            if (!eat('}')) {
                uint32_t next = 0;
                do {
                    if (!item(r, &slots, next)) return false;
                    next = slots.back().first + 1;
                } while (eat(','));
                if (!eat('}')) return fail("expected '}'");
            }
            std::stable_sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
            for (auto& sl : slots) r->algos.push_back(sl.second); /* CompactAlgoList: levels in order */
            return true;
        }
        std::string key = tpl_key(name);
        if (!algo_types().count(key)) return fail("'" + name + "' is not one of CANN's templates, and no '{' follows");
        r->executor = "sole";
        r->algos.push_back({key, true});
        return true;
    }
    bool segment(AlgoRule* r) {
        size_t save = pos;
        std::string name;
        if (ident(&name)) {
            ws();
            if (pos < s.size() && s[pos] == ':' && (pos + 1 >= s.size() || s[pos + 1] != ':')) {
                pos++;
                r->op = algo_lower(name);
                if (!op_types().count(r->op)) return fail("'" + name + "' is not one of CANN's op types");
            } else {
                pos = save;
            }
        }
        save = pos;
        if (ident(&name) && algo_lower(name) == "not" && eat('(')) {
            r->enable = false;
            if (!unit(r)) return false;
            return eat(')') || fail("expected ')' after not(...");
        }
        pos = save;
        return unit(r);
    }
    bool rules(std::vector<AlgoRule>* out) {
        ws();
        while (pos < s.size()) {
            AlgoRule r;
            if (!segment(&r)) return false;
            out->push_back(r);
            if (!eat(';')) break;
            ws();
        }
        ws();
        return pos >= s.size() || fail("unexpected text");
    }
};

/* The documented form (alg_env_config.cc SetHcclAlgoConfig): "level0:NA;level1:<algo>" for every
 * op, or "<op>=level0:NA;level1:<algo>/<op>=..." (ops: broadcast allreduce reduce send receive
 * allgather reducescatter alltoall gather scatter sendrecv others). Spaces are ignored. */
bool parse_levels(const std::string& text, AlgoConfig* out, std::string* err) {
    static const std::map<std::string, std::vector<int>> ops = {
        {"broadcast", {HCCL_CMD_BROADCAST}},
        {"allreduce", {HCCL_CMD_ALLREDUCE}},
        {"reduce", {HCCL_CMD_REDUCE}},
        {"send", {HCCL_CMD_SEND}},
        {"receive", {HCCL_CMD_RECEIVE}},
        {"allgather", {HCCL_CMD_ALLGATHER, HCCL_CMD_ALLGATHER_V}},
        {"reducescatter", {HCCL_CMD_REDUCE_SCATTER, HCCL_CMD_REDUCE_SCATTER_V}},
        {"alltoall", {HCCL_CMD_ALLTOALL, HCCL_CMD_ALLTOALLV, HCCL_CMD_ALLTOALLVC}},
        {"gather", {HCCL_CMD_GATHER}},
        {"scatter", {HCCL_CMD_SCATTER}},
        {"sendrecv", {HCCL_CMD_BATCH_SEND_RECV}}};
    static const char* values[] = {"null", "ring", "pipeline", "fullmesh", "H-D_R", "pairwise",
                                   "NHR",  "NHR_V1", "AHC", "AHC_BROKE", "NB", "NA"};
    std::string t;
    for (char ch : text)
        if (ch != ' ') t += ch;
    std::vector<std::string> parts;
    for (size_t b = 0; b <= t.size();) {
        size_t e = t.find('/', b);
        if (e == std::string::npos) e = t.size();
        parts.push_back(t.substr(b, e - b));
        b = e + 1;
    }
    bool common = parts.size() == 1 && parts[0].find('=') == std::string::npos;
    for (const std::string& part : parts) {
        std::string op = "others", body = part;
        if (!common) {
            size_t eq = part.find('=');
            if (eq == std::string::npos) {
                *err = "'" + part + "' is not <op>=level0:NA;level1:<algo>";
                return false;
            }
            op = part.substr(0, eq);
            body = part.substr(eq + 1);
            if (op != "others" && !ops.count(op)) {
                *err = "op '" + op + "' is not one of broadcast, allreduce, reduce, send, receive, allgather, "
                       "reducescatter, alltoall, gather, scatter, sendrecv, others";
                return false;
            }
        }
        std::string lv[4];
        for (size_t b = 0; b <= body.size();) {
            size_t e = body.find(';', b);
            if (e == std::string::npos) e = body.size();
            std::string level = body.substr(b, e - b);
            b = e + 1;
            size_t colon = level.find(':');
            if (colon == std::string::npos || colon == 0 || colon + 1 == level.size() ||
                level.compare(0, 5, "level") != 0 || colon != 6 || level[5] < '0' || level[5] > '3') {
                *err = "'" + level + "' is not levelN:<algo> (N 0-3)";
                return false;
            }
            std::string v = level.substr(colon + 1);
            for (const char* known : values) /* CANN's map is case-sensitive; any case is taken here */
                if (algo_lower(v) == algo_lower(known)) v = known;
            if (std::find(std::begin(values), std::end(values), v) == std::end(values)) {
                *err = "algorithm '" + v + "' is not one of null, ring, pipeline, fullmesh, H-D_R, pairwise, NHR, "
                       "NHR_V1, AHC, AHC_BROKE, NB, NA";
                return false;
            }
            int n = level[5] - '0';
            if (!lv[n].empty()) {
                *err = "level" + std::to_string(n) + " is set twice";
                return false;
            }
            lv[n] = v;
        }
        auto add = [&](int coll) {
            std::string l1 = lv[1] == "NA" ? "" : lv[1], l2 = lv[2] == "NA" ? "" : lv[2];
            if (!lv[0].empty() && lv[0] != "NA" && l1.empty()) l1 = lv[0]; /* level0 other than NA (CANN: only NA) */
            for (auto& e : out->levels)
                if (e.first == coll) {
                    e.second = {l1, l2};
                    return;
                }
            out->levels.push_back({coll, {l1, l2}});
        };
        if (op == "others") {
            for (auto& kv : ops)
                for (int coll : kv.second) add(coll);
            for (int coll : {HCCL_CMD_BARRIER}) add(coll);
        }
    }
    for (const std::string& part : parts) /* specific ops after "others" (SetSpecificAlgType) */
        if (!common) {
            size_t eq = part.find('=');
            std::string op = part.substr(0, eq);
            if (op == "others") continue;
            AlgoConfig one;
            std::string e2;
            if (!parse_levels(part.substr(eq + 1), &one, &e2)) continue;
            for (int coll : ops.at(op))
                for (auto& e : one.levels)
                    if (e.first == coll) {
                        bool found = false;
                        for (auto& mine : out->levels)
                            if (mine.first == coll) mine.second = e.second, found = true;
                        if (!found) out->levels.push_back(e);
                    }
        }
    return true;
}

/* MatchesAlgoPattern (alg_parse.cc:493): after prefix, one template per level, each the named
 * one (enabled) or any other (not(...)), longest names first, and nothing left over. */
bool matches_pattern(const std::string& name, const std::string& prefix,
                     const std::vector<std::pair<std::string, bool>>& algos) {
    if (!algo_starts_with(name, prefix)) return false;
    static std::vector<std::string> sorted = [] {
        std::vector<std::string> v;
        for (auto& kv : algo_types()) v.push_back(kv.second);
        std::stable_sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
        return v;
    }();
    size_t pos = prefix.size();
    for (auto& a : algos) {
        std::string hit;
        for (auto& cand : sorted)
            if (name.compare(pos, cand.size(), cand) == 0) {
                hit = cand;
                break;
            }
        if (hit.empty()) return false;
        if ((hit == algo_types().at(a.first)) != a.second) return false;
        pos += hit.size();
    }
    return pos == name.size();
}

}  // namespace

int parse_algo_config(const std::string& text, AlgoConfig* out, std::string* err) {
    *out = AlgoConfig();
    out->text = text;
    bool blank = std::all_of(text.begin(), text.end(), [](char c) { return std::isspace((unsigned char)c); });
    if (blank) return 0;
    Reader r(text);
    std::vector<AlgoRule> rules;
    if (r.rules(&rules)) {
        out->executor_grammar = true;
        out->rules = rules;
        return 0;
    }
    std::string lerr;
    if (parse_levels(text, out, &lerr)) return 0;
    *err = strprintf("HCCL_ALGO='%s' is neither CANN's executor grammar ([op:]executor{level0=template,...} or "
                     "[op:]template or not(...), segments separated by ';'; %s) nor its documented form "
                     "(level0:NA;level1:<algo> or <op>=level0:NA;level1:<algo>/...; %s)",
                     text.c_str(), r.err.c_str(), lerr.c_str());
    *out = AlgoConfig();
    return HCCL_E_PARA;
}

bool apply_algo_config(const AlgoConfig& cfg, int coll, const std::vector<std::string>& names, std::vector<bool>* kept,
                       std::string* rule) {
    kept->assign(names.size(), true);
    if (!cfg.executor_grammar) return false;
    const std::string op = op_key(coll);
    if (op.empty()) return false;
    /* ExcludeAlgosNotInEngines (:638): with HCCL_ALGO set, only the candidate engines' algorithms
     * (here "Aicpu...") stay */
    for (size_t i = 0; i < names.size(); i++)
        if (!algo_starts_with(names[i], "Aicpu")) (*kept)[i] = false;
    const std::string prefix_op = "Aicpu" + op_types().at(op);
    /* the last rule first (:687); the first one that decides for this op ends it */
    for (size_t k = cfg.rules.size(); k-- > 0;) {
        const AlgoRule& r = cfg.rules[k];
        if (!r.op.empty() && r.op != op) continue;
        const std::string prefix = prefix_op + executor_types().at(r.executor);
        const bool negated_algo = r.enable && std::any_of(r.algos.begin(), r.algos.end(), [](auto& a) { return !a.second; });
        std::vector<size_t> hit;
        for (size_t i = 0; i < names.size(); i++) {
            bool m;
            if (negated_algo || r.algos.empty()) {
                m = negated_algo ? matches_pattern(names[i], prefix, r.algos) : algo_starts_with(names[i], prefix);
            } else {
                std::string full = prefix;
                for (auto& a : r.algos) full += algo_types().at(a.first);
                m = names[i] == full;
            }
            if (m) hit.push_back(i);
        }
        std::string text = (r.op.empty() ? "" : r.op + ":") + std::string(r.enable ? "" : "not(") + r.executor + "{";
        for (size_t j = 0; j < r.algos.size(); j++)
            text += strprintf("%slevel%zu=%s%s%s", j ? "," : "", j, r.algos[j].second ? "" : "not(",
                              r.algos[j].first.c_str(), r.algos[j].second ? "" : ")");
        text += r.enable ? "}" : "})";
        if (!r.enable) { /* not(...): drops what it names; decides when it named something (:632) */
            for (size_t i : hit) (*kept)[i] = false;
            if (!hit.empty()) {
                *rule = text;
                return true;
            }
            continue;
        }
        std::vector<size_t> live;
        for (size_t i : hit)
            if ((*kept)[i]) live.push_back(i);
        if (live.empty()) continue; /* matched nothing (alive): the next rule */
        for (size_t i = 0; i < names.size(); i++)
            (*kept)[i] = std::find(live.begin(), live.end(), i) != live.end();
        *rule = text;
        return true;
    }
    return false;
}

}  // namespace emu
