/* HCCL host plane: the cluster topology of a communicator (see topology.h). */
#include "hccl/topology.h"

#include "hccl/comm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

namespace emu {

const char* link_type_name(LinkType t) {
    switch (t) {
        case LinkType::HCCS: return "HCCS";
        case LinkType::UB: return "UB";
        case LinkType::RoCE: return "RoCE";
        default: return "none";
    }
}

const char* soc_product() {
    switch (cfg().soc) {
        case Soc::A3: return "A3";
        case Soc::A950: return "950";
        default: return "A2";
    }
}

namespace {

/* NPUs per server, by product. CANN, hicann/hccl docs/zh/user_guide/concepts.md: "AI Server:
 * 又称计算节点，通常是8卡或16卡的昇腾NPU设备组成的服务器" (an AI Server holds 8 or 16 NPUs); A2
 * servers (Atlas 800T A2, rank_table_config_a2.md's examples, env_config_info.md: "每个AI
 * Server节点有8个Device") hold 8; A3 servers 16 (docs/zh/rfcs/0001-add-batch-invariant-
 * reducescatter.md: "A3/16P topology"). 950: 8 (CANN's HCCL Performance Tester page, hiascend.com
 * HCCLpertest_16_0007: NPUs per compute node 1-8 on Ascend 950PR/950DT, 1-16 on A3, 1-8 on A2). */
uint32_t max_per_server(const std::string& product) { return product == "A3" ? 16 : 8; }

bool parse_u32(const char* s, const char* end, uint32_t* out) {
    if (s == end || end - s > 9) return false;
    uint32_t v = 0;
    for (const char* p = s; p < end; p++) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + (uint32_t)(*p - '0');
    }
    *out = v;
    return true;
}

/* HCOMM_KIT_LINKS_DOWN: "a-b,c-d". */
int parse_links_down(Topology* t, const char* api) {
    const char* v = getenv("HCOMM_KIT_LINKS_DOWN");
    if (!v || !*v) return 0;
    std::string s(v);
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        if (comma == std::string::npos) comma = s.size();
        std::string item = s.substr(pos, comma - pos);
        pos = comma + 1;
        while (!item.empty() && item.front() == ' ') item.erase(item.begin());
        while (!item.empty() && item.back() == ' ') item.pop_back();
        if (item.empty()) {
            if (comma == s.size()) break;
            continue;
        }
        size_t dash = item.find('-');
        uint32_t a = 0, b = 0;
        if (dash == std::string::npos || !parse_u32(item.c_str(), item.c_str() + dash, &a) ||
            !parse_u32(item.c_str() + dash + 1, item.c_str() + item.size(), &b))
            return seterr(HCCL_E_PARA, api, "HCOMM_KIT_LINKS_DOWN='%s': entry '%s' is not RANK-RANK (e.g. 0-1,2-5)", v,
                          item.c_str());
        if (a == b)
            return seterr(HCCL_E_PARA, api, "HCOMM_KIT_LINKS_DOWN='%s': entry '%s' links rank %u to itself", v,
                          item.c_str(), a);
        if (a >= t->nranks || b >= t->nranks)
            return seterr(HCCL_E_PARA, api, "HCOMM_KIT_LINKS_DOWN='%s': entry '%s' names rank %u, but the communicator "
                          "has %u ranks", v, item.c_str(), std::max(a, b), t->nranks);
        t->down.insert(a < b ? std::make_pair(a, b) : std::make_pair(b, a));
        if (comma == s.size()) break;
    }
    return 0;
}

}  // namespace

uint32_t Topology::layers() const {
    if (nservers <= 1) return 1;
    if (npods > 1 && npods < nservers) return 3;
    return 2;
}

uint32_t Topology::group(uint32_t layer, uint32_t r) const {
    if (layer == 0) return server[r];
    if (layer == 1 && layers() == 3) return pod[r];
    return 0;
}

uint32_t Topology::groups(uint32_t layer) const {
    if (layer == 0) return nservers;
    if (layer == 1 && layers() == 3) return npods;
    return 1;
}

std::vector<uint32_t> Topology::members(uint32_t layer, uint32_t g) const {
    std::vector<uint32_t> out;
    for (uint32_t r = 0; r < nranks; r++)
        if (group(layer, r) == g) out.push_back(r);
    return out;
}

uint32_t Topology::common_layer(uint32_t a, uint32_t b) const {
    for (uint32_t l = 0; l < layers(); l++)
        if (group(l, a) == group(l, b)) return l;
    return layers() - 1;
}

/* HCCS: A2 inside a server (full mesh); UB: A3/950 inside a super-pod (a server included);
 * RoCE: between servers otherwise (A2 has no super-pods). */
LinkType Topology::in_server() const { return product == "A2" ? LinkType::HCCS : LinkType::UB; }
LinkType Topology::in_pod() const { return product == "A2" ? LinkType::RoCE : LinkType::UB; }

LinkType Topology::link(uint32_t a, uint32_t b) const {
    if (a == b) return LinkType::None;
    if (server[a] == server[b]) return in_server();
    if (pod[a] == pod[b]) return in_pod();
    return LinkType::RoCE;
}

int Topology::protocol(uint32_t a, uint32_t b) const {
    switch (link(a, b)) {
        case LinkType::HCCS: return COMM_PROTOCOL_HCCS;
        /* A3's super-pod bus is offered to channels as HCCS (its AICPU_TS protocols: ROCE, HCCS,
         * HCCS_ONLY); 950's as UB_CTP. */
        case LinkType::UB: return product == "950" ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
        case LinkType::RoCE: return COMM_PROTOCOL_ROCE;
        default: return COMM_PROTOCOL_RESERVED;
    }
}

Topology Topology::restrict_to(const std::vector<uint32_t>& m) const {
    Topology t;
    t.product = product;
    t.source = source + " (sub-communicator)";
    t.nranks = (uint32_t)m.size();
    std::map<uint32_t, uint32_t> smap, pmap, rmap;
    for (uint32_t i = 0; i < m.size(); i++) {
        uint32_t r = m[i] < nranks ? m[i] : 0;
        rmap[r] = i;
        uint32_t s = smap.emplace(server[r], (uint32_t)smap.size()).first->second;
        uint32_t p = pmap.emplace(pod[r], (uint32_t)pmap.size()).first->second;
        t.server.push_back(s);
        t.pod.push_back(p);
    }
    t.nservers = std::max<uint32_t>(1, (uint32_t)smap.size());
    t.npods = std::max<uint32_t>(1, (uint32_t)pmap.size());
    for (auto& d : down)
        if (rmap.count(d.first) && rmap.count(d.second)) {
            uint32_t a = rmap[d.first], b = rmap[d.second];
            t.down.insert(a < b ? std::make_pair(a, b) : std::make_pair(b, a));
        }
    return t;
}

std::string Topology::json() const {
    std::string s = "{\"product\":\"" + product + "\",\"source\":\"";
    for (char ch : source) {
        if (ch == '"' || ch == '\\') s += '\\';
        s += ch;
    }
    /* the link types by where the pair is (Python's Topology.link reads them, no rule twice) */
    s += strprintf("\",\"link_in_server\":\"%s\",\"link_in_pod\":\"%s\",\"link_between_pods\":\"%s\"",
                   link_type_name(in_server()), link_type_name(in_pod()), link_type_name(LinkType::RoCE));
    s += ",\"servers\":[";
    for (uint32_t g = 0; g < nservers; g++) {
        s += g ? ",[" : "[";
        bool first = true;
        for (uint32_t r = 0; r < nranks; r++)
            if (server[r] == g) s += (first ? "" : ",") + std::to_string(r), first = false;
        s += "]";
    }
    s += "],\"pods\":[";
    std::vector<std::vector<uint32_t>> pods(npods);
    for (uint32_t g = 0; g < nservers; g++)
        for (uint32_t r = 0; r < nranks; r++)
            if (server[r] == g) {
                pods[pod[r]].push_back(g);
                break;
            }
    for (uint32_t p = 0; p < npods; p++) {
        s += p ? ",[" : "[";
        for (size_t i = 0; i < pods[p].size(); i++) s += (i ? "," : "") + std::to_string(pods[p][i]);
        s += "]";
    }
    s += "],\"down\":[";
    bool first = true;
    for (auto& d : down) {
        s += strprintf("%s[%u,%u]", first ? "" : ",", d.first, d.second);
        first = false;
    }
    return s + "]}";
}

int topology_build(Topology* t, const std::string& product, const std::string& source, std::vector<uint32_t> servers,
                   std::vector<uint32_t> pods, const char* api, bool check_limit) {
    /* dense indices, in the order of the given ones */
    for (auto* v : {&servers, &pods}) {
        std::map<uint32_t, uint32_t> dense;
        for (uint32_t x : *v) dense.emplace(x, 0);
        uint32_t i = 0;
        for (auto& kv : dense) kv.second = i++;
        for (uint32_t& x : *v) x = dense[x];
    }
    t->product = product;
    t->source = source;
    t->nranks = (uint32_t)servers.size();
    t->server = std::move(servers);
    std::map<uint32_t, uint32_t> per;
    for (uint32_t s : t->server) per[s]++;
    t->nservers = (uint32_t)per.size();
    for (auto& kv : per)
        if (check_limit && kv.second > max_per_server(product))
            return seterr(HCCL_E_PARA, api, "%s: server %u holds %u ranks, but an %s server holds at most %u NPUs",
                          source.c_str(), kv.first, kv.second, product.c_str(), max_per_server(product));
    if (pods.empty()) {
        t->pod = t->server;
        t->npods = t->nservers;
    } else {
        t->pod = std::move(pods);
        std::set<uint32_t> p(t->pod.begin(), t->pod.end());
        t->npods = (uint32_t)p.size();
    }
    return parse_links_down(t, api);
}

int topology_from_env(uint32_t nranks, Topology* t, const char* api) {
    const char* v = getenv("HCOMM_KIT_TOPOLOGY");
    std::vector<uint32_t> servers(nranks, 0);
    if (!v || !*v) return topology_build(t, soc_product(), "default (one server)", servers, {}, api, false);
    /* PRODUCT:SERVERSxNPUS, or PRODUCT:PODSxSERVERSxNPUS (super-pods of SERVERS servers each) */
    const char* colon = strchr(v, ':');
    std::string product = colon ? std::string(v, colon) : "";
    std::vector<uint32_t> dims;
    bool ok = colon != nullptr;
    for (const char* p = colon ? colon + 1 : v; ok;) {
        const char* x = strchr(p, 'x');
        const char* end = x ? x : v + strlen(v);
        uint32_t d = 0;
        ok = dims.size() < 3 && parse_u32(p, end, &d) && d != 0;
        if (ok) dims.push_back(d);
        if (!x) break;
        p = x + 1;
    }
    if (!ok || dims.size() < 2 || (product != "A2" && product != "A3" && product != "950"))
        return seterr(HCCL_E_PARA, api, "HCOMM_KIT_TOPOLOGY='%s' is not PRODUCT:SERVERSxNPUS with PRODUCT A2, A3 or 950 "
                      "(e.g. A2:2x8, A3:1x16, 950:4x8), nor PRODUCT:PODSxSERVERSxNPUS (A3 or 950 super-pods: "
                      "A3:2x2x8)", v);
    if (dims.size() == 3 && product == "A2")
        return seterr(HCCL_E_PARA, api, "HCOMM_KIT_TOPOLOGY='%s': A2 has no super-pods (PODSxSERVERSxNPUS is for A3 and "
                      "950); use A2:%ux%u", v, dims[0] * dims[1], dims[2]);
    if (product != soc_product())
        return seterr(HCCL_E_PARA, api, "HCOMM_KIT_TOPOLOGY='%s' is an %s topology but the SoC is %s (%s): set "
                      "HCOMM_KIT_SOC to match (the --topology flag does)", v, product.c_str(), cfg().soc_name.c_str(),
                      soc_product());
    const uint32_t np = dims.back();
    const uint64_t ns = dims.size() == 3 ? (uint64_t)dims[0] * dims[1] : dims[0];
    if (ns * np != nranks)
        return seterr(HCCL_E_PARA, api, "HCOMM_KIT_TOPOLOGY='%s' describes %llu servers x %u NPUs = %llu ranks, but the "
                      "communicator has %u ranks", v, (unsigned long long)ns, np, (unsigned long long)ns * np, nranks);
    std::vector<uint32_t> pods;
    for (uint32_t r = 0; r < nranks; r++) servers[r] = r / np;
    if (dims.size() == 3)
        for (uint32_t r = 0; r < nranks; r++) pods.push_back(r / (np * dims[1]));
    return topology_build(t, product, std::string("HCOMM_KIT_TOPOLOGY=") + v, servers, pods, api);
}

}  // namespace emu
