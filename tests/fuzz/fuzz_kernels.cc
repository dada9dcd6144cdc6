/* AICPU kernel used by the fuzz targets: ignores its arguments and succeeds. */
#include <cstdint>

extern "C" __attribute__((visibility("default"))) uint32_t FuzzNop(void* args) {
    (void)args;
    return 0;
}
