/* C wrappers used by fuzz_hcomm.cc to pass arbitrary ints as enum arguments, as C callers (and
 * ctypes) do. In C an enum argument is an int; in C++ the harness itself would have to load an
 * out-of-range enum value, which UBSan reports as the harness's own undefined behaviour. */
#include <hccl/hcomm_primitives.h>

int32_t shim_local_reduce(ThreadHandle t, void* dst, const void* src, uint64_t n, int32_t dt, int32_t op) {
    return HcommLocalReduceOnThread(t, dst, src, n, dt, op);
}

int32_t shim_write_reduce(ThreadHandle t, ChannelHandle ch, void* dst, const void* src, uint64_t n, int32_t dt,
                          int32_t op) {
    return HcommWriteReduceOnThread(t, ch, dst, src, n, dt, op);
}

int32_t shim_write_reduce_notify(ThreadHandle t, ChannelHandle ch, void* dst, const void* src, uint64_t n, int32_t dt,
                                 int32_t op, uint32_t idx) {
    return HcommWriteReduceWithNotifyOnThread(t, ch, dst, src, n, dt, op, idx);
}

int32_t shim_read_reduce(ThreadHandle t, ChannelHandle ch, void* dst, const void* src, uint64_t n, int32_t dt,
                         int32_t op) {
    return HcommReadReduceOnThread(t, ch, dst, src, n, dt, op);
}
