/* HCCL host plane: the cluster topology of a communicator (servers, super-pods, link types per
 * pair of ranks, links taken down). Sources, in this order: a CANN rank table (server_list, and
 * super_pod_list where CANN's A3 format has it), HCOMM_KIT_TOPOLOGY=PRODUCT:SERVERSxNPUS (or
 * PRODUCT:PODSxSERVERSxNPUS: super-pods of SERVERS servers), else one server holding every rank. HCOMM_KIT_LINKS_DOWN=a-b,c-d takes links down in every case. */
#ifndef HCOMM_KIT_EMU_TOPOLOGY_H
#define HCOMM_KIT_EMU_TOPOLOGY_H

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace emu {

/* The link between two ranks: what carries it. */
enum class LinkType { None = 0, HCCS = 1, UB = 2, RoCE = 3 };
const char* link_type_name(LinkType t);

struct Topology {
    std::string product = "A2";   /* "A2", "A3", "950" */
    std::string source = "default"; /* where it came from, for messages and the Python view */
    uint32_t nranks = 0;
    std::vector<uint32_t> server; /* server index of each rank (0..nservers-1) */
    std::vector<uint32_t> pod;    /* super-pod index of each rank (AI Server mode: the server's own) */
    uint32_t nservers = 1, npods = 1;
    std::set<std::pair<uint32_t, uint32_t>> down; /* (a, b), a < b */

    /* Net layers (CANN's HcclNetLayer L0, L1, L2): L0 = inside a server; L1 = inside a super-pod
     * when there are several super-pods of several servers, else everything; L2 = everything. */
    uint32_t layers() const;
    /* Group (topology instance) of rank r at layer l: server, super-pod or 0. */
    uint32_t group(uint32_t layer, uint32_t r) const;
    uint32_t groups(uint32_t layer) const;
    /* Ranks of group g at layer l, ascending. */
    std::vector<uint32_t> members(uint32_t layer, uint32_t g) const;
    /* Lowest layer whose instance holds both ranks. */
    uint32_t common_layer(uint32_t a, uint32_t b) const;
    LinkType in_server() const; /* link type between two ranks of one server */
    LinkType in_pod() const;    /* ... of two servers of one super-pod */
    /* Link type between two different ranks (regardless of links down). */
    LinkType link(uint32_t a, uint32_t b) const;
    bool is_down(uint32_t a, uint32_t b) const {
        return down.count(a < b ? std::make_pair(a, b) : std::make_pair(b, a)) != 0;
    }
    /* CommProtocol value a channel over the a-b link uses. */
    int protocol(uint32_t a, uint32_t b) const;
    /* Restriction to the parent ranks `members` (sub-communicators), renumbered 0..n-1. */
    Topology restrict_to(const std::vector<uint32_t>& members) const;
    /* One-line JSON: {"product":..,"source":..,"servers":[[ranks]..],"pods":[[servers]..],"down":[[a,b]..]} */
    std::string json() const;
};

/* Builds a topology of nranks from servers (server index per rank) and pods (pod index per
 * rank; empty = AI Server mode), checks the per-server limit of the product (check_limit: not
 * for the default one-server topology, which holds every rank as before) and applies
 * HCOMM_KIT_LINKS_DOWN. 0, or the HCCL error (api, message naming the values). */
int topology_build(Topology* t, const std::string& product, const std::string& source, std::vector<uint32_t> servers,
                   std::vector<uint32_t> pods, const char* api, bool check_limit = true);
/* The topology for a communicator without a rank table: HCOMM_KIT_TOPOLOGY, else one server. */
int topology_from_env(uint32_t nranks, Topology* t, const char* api);
/* The product of the running SoC ("A2", "A3", "950"). */
const char* soc_product();

}  // namespace emu

#endif
