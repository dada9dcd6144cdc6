/*
 * hcomm-kit CPU emulator: placeholder for CANN's <acl/acl_base_mdl.h>.
 * The model-related base types are outside the emulated interface.
 */
#ifndef INC_EXTERNAL_ACL_ACL_BASE_MDL_H_
#define INC_EXTERNAL_ACL_ACL_BASE_MDL_H_

#include "acl_base_rt.h"

#endif /* INC_EXTERNAL_ACL_ACL_BASE_MDL_H_ */
