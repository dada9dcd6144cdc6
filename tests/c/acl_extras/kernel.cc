/* Kernel of tests/c/acl_extras: writes `value` to `*out` (both in the argument blob). */
#include <cstdint>

struct ExtrasArgs {
    uint32_t* out;
    uint32_t value;
};

extern "C" uint32_t HkExtrasStore(void* args)
{
    const ExtrasArgs* a = static_cast<const ExtrasArgs*>(args);
    *a->out = a->value;
    return 0;
}
