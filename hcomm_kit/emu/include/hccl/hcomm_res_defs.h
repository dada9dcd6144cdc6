/* hcomm-kit CPU emulator: <hccl/hcomm_res_defs.h> resolves to the top-level header. */
#include "../hcomm_res_defs.h"
