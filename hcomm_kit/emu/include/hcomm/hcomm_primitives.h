/* hcomm-kit CPU emulator: <hcomm/hcomm_primitives.h> (same declarations as <hccl/hcomm_primitives.h>). */
#include "../hccl/hcomm_primitives.h"
