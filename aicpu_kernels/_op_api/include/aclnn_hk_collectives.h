/*
 * aclnn_hk_collectives.h -- every built-in collective of hcomm-kit behind CANN's aclnn interface
 * (one header per operator, as CANN ships them; this one includes them all).
 */
#ifndef ACLNN_HK_COLLECTIVES_H_
#define ACLNN_HK_COLLECTIVES_H_

#include "aclnn_hk_all_reduce.h"
#include "aclnn_hk_all_gather.h"
#include "aclnn_hk_reduce_scatter.h"
#include "aclnn_hk_broadcast.h"
#include "aclnn_hk_reduce.h"
#include "aclnn_hk_scatter.h"
#include "aclnn_hk_all_to_all.h"
#include "aclnn_hk_send.h"
#include "aclnn_hk_recv.h"
#include "aclnn_hk_all_gather_v.h"
#include "aclnn_hk_reduce_scatter_v.h"
#include "aclnn_hk_all_to_all_v.h"
#include "aclnn_hk_all_to_all_vc.h"
#include "aclnn_hk_gather.h"
#include "aclnn_hk_batch_send_recv.h"
#include "aclnn_hk_barrier.h"

#endif /* ACLNN_HK_COLLECTIVES_H_ */
