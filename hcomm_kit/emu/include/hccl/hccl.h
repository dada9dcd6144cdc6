/*
 * hcomm-kit CPU emulator: convenience umbrella for <hccl/hccl.h>.
 * Provides the HCCL types and communicator management of this emulator;
 * the built-in collective operators (HcclAllReduce, ...) are not emulated.
 */
#ifndef HCCL_H_
#define HCCL_H_

#include "hccl_types.h"
#include "hccl_comm.h"

#endif /* HCCL_H_ */
