/*
 * hcomm-kit CPU emulator: <aclnn/aclnn_base.h>, what every generated aclnn_<op>.h includes: the
 * meta API (<aclnn/acl_meta.h>), the stream type and the aclnn status codes.
 *
 * Codes: CANN API reference "aclnn Return Codes" (hiascend.com, canncommercial 850,
 * API/aolapi/atlasascendc_api_07_1205.html), tables 1 and 2. CANN declares them in its op_api
 * headers (the header is not in the public pages found); the values are the documented ones.
 * The message of a failed call is in aclGetRecentErrMsg() (<acl/acl_base.h>).
 */
#ifndef HCOMM_KIT_ACLNN_BASE_H
#define HCOMM_KIT_ACLNN_BASE_H

#include "acl/acl_base.h"
#include "acl/acl_rt.h"
#include "aclnn/acl_meta.h"

#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001           /* a parameter is an invalid NULL */
#define ACLNN_ERR_PARAM_INVALID 161002           /* a parameter fails the check (dtype, shape, ...) */
#define ACLNN_ERR_RUNTIME_ERROR 361001           /* a runtime (NPU) call failed */
#define ACLNN_ERR_INNER 561000
#define ACLNN_ERR_INNER_INFERSHAPE_ERROR 561001
#define ACLNN_ERR_INNER_TILING_ERROR 561002
#define ACLNN_ERR_INNER_FIND_KERNEL_ERROR 561003 /* the operator's kernel was not found / loaded */
#define ACLNN_ERR_INNER_CREATE_EXECUTOR 561101
#define ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR 561102
#define ACLNN_ERR_INNER_NULLPTR 561103           /* e.g. a NULL executor */

#endif /* HCOMM_KIT_ACLNN_BASE_H */
