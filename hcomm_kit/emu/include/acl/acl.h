/*
 * hcomm-kit CPU emulator: umbrella header matching CANN's <acl/acl.h>.
 */
#ifndef INC_EXTERNAL_ACL_ACL_H_
#define INC_EXTERNAL_ACL_ACL_H_

#include "acl_base.h"
#include "acl_rt.h"

#endif /* INC_EXTERNAL_ACL_ACL_H_ */
