/*
 * hcomm-kit CPU emulator: placeholder for CANN's <acl/error_codes/ge_error_codes.h>.
 * Graph-engine error codes are outside the emulated interface.
 */
#ifndef INC_EXTERNAL_ACL_ERROR_CODES_GE_ERROR_CODES_H_
#define INC_EXTERNAL_ACL_ERROR_CODES_GE_ERROR_CODES_H_

#include <stdint.h>

#endif /* INC_EXTERNAL_ACL_ERROR_CODES_GE_ERROR_CODES_H_ */
