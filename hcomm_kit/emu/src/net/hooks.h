/*
 * hcomm-kit CPU emulator, network layer: what it asks of the layers above (base/hooks.h says the
 * rules). The network's handlers run inside UCX's progress (any thread, under the network's lock):
 * they must not call the network again, nor block.
 */
#ifndef HCOMM_KIT_EMU_NET_HOOKS_H
#define HCOMM_KIT_EMU_NET_HOOKS_H

#include "net/transport.h"

namespace emu {

struct NetHooks {
    /* hcomm/: a peer's record of notify slot `slot` of device `device` of this process. */
    void (*record)(int device, uint32_t slot, const RecordWords& w);
    /* hccl/: a control message for the communicator `owner` subscribed under m.key. */
    void (*control)(void* owner, const CtlMsg& m, const void* payload, size_t len);
};
extern NetHooks net_hooks;

}  // namespace emu

#endif
