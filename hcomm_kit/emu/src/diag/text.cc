/* Diagnosis: words shared by the checker's findings, the hang reports and the monitor's lines. */
#include "diag/board.h"

namespace emu {

std::string json_esc(const std::string& s) {
    std::string o;
    o.reserve(s.size() + 8);
    for (unsigned char ch : s) {
        switch (ch) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            default:
                if (ch < 0x20) o += strprintf("\\u%04x", ch);
                else o += (char)ch;
        }
    }
    return o;
}

std::string wait_text(const DiagWait& w) {
    switch (w.kind) {
        case 1: return strprintf("channel notify slot %u from rank %u", w.index, (unsigned)w.peer);
        case 2: return strprintf("ACL notify id %u", w.index);
        default: return strprintf("thread notify slot %u of %s", w.index, thread_name(w.slot_thread).c_str());
    }
}


/* "op 'tag' #3" / "op 'tag' #3, use #2 of the channel with rank 1" */
std::string op_text(const char* tag, uint32_t inst, uint32_t use, int peer) {
    if (!tag || !*tag) return "a host-side task";
    if (use) return strprintf("op '%s' #%u, use #%u of the channel with rank %d", tag, inst, use, peer);
    return strprintf("op '%s' #%u", tag, inst);
}


std::string task_pos(uint32_t bidx, uint32_t bsize) {
    if (!bsize) return "a task";
    return strprintf("task %u of %u", bidx + 1, bsize);
}


/* The description of the notify a record sets (Record, or Copy/Reduce with post record). */
std::string record_target_text(const SlotDesc& d, int slot_rank) {
    switch (d.kind) {
        case 1: return strprintf("channel notify slot %u of rank %d", d.index, slot_rank);
        case 2: return strprintf("ACL notify id %u of rank %d", d.index, slot_rank);
        case 0xff: return strprintf("notify slot %u of rank %d", d.index, slot_rank);
        default: return strprintf("thread notify slot %u of rank %d %s", d.index, slot_rank, thread_name(d.thread_no).c_str());
    }
}


std::string record_target_text(const HTask& t, int slot_rank) { return record_target_text(t.desc, slot_rank); }

std::string prov_text(Comm* c, uint64_t p) {
    if (!(p & prov::kValid)) return "an earlier record";
    if (p & prov::kHost) return strprintf("an earlier record by rank %u's host side", prov::rank(p));
    std::string tag;
    if (c) comm_op_tag(c, prov::tag16(p), &tag);
    return strprintf("an earlier record by rank %u %s for %s", prov::rank(p), thread_name(prov::thread(p)).c_str(),
                     tag.empty() ? strprintf("an operation with tag hash %04x", prov::tag16(p)).c_str()
                                 : strprintf("op '%s'", tag.c_str()).c_str());
}

}  // namespace emu
