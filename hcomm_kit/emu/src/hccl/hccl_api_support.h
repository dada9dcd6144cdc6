/* hccl_api_support.h -- GENERATED from hcomm_kit/base/dtypes.py (HCCL_API_REDUCE, HCCL_API_MOVE) by
 *   python -m hcomm_kit.base.dtypes --c-header > hcomm_kit/emu/src/hccl/hccl_api_support.h
 * Do not edit: change the Python table (its comment cites CANN's pages); tests/test_dtypes.py
 * fails while this file differs from the rendering. Masks: bit (1u << HcclDataType value). */
#ifndef EMU_HCCL_API_SUPPORT_H
#define EMU_HCCL_API_SUPPORT_H

#include <stdint.h>

namespace emu {

/* A reducing API on a product: ops[HcclReduceOp] = the dtypes it accepts with that op. */
struct HcclApiReduceRow {
    const char* api;
    const char* product; /* HCOMM_KIT_SOC name */
    uint32_t ops[4];     /* sum, prod, max, min */
};

static const HcclApiReduceRow kHcclApiReduce[] = {
    {"HcclAllReduce", "Ascend910B", {0x083fu, 0x003du, 0x083fu, 0x083fu}},
    {"HcclAllReduce", "Ascend910_93", {0x083fu, 0x003du, 0x083fu, 0x083fu}},
    {"HcclAllReduce", "Ascend950", {0x0c7fu, 0x047du, 0x0c7fu, 0x0c7fu}},
    {"HcclReduce", "Ascend910B", {0x083fu, 0x003du, 0x083fu, 0x083fu}},
    {"HcclReduce", "Ascend910_93", {0x083fu, 0x003du, 0x083fu, 0x083fu}},
    {"HcclReduce", "Ascend950", {0x0c7fu, 0x047du, 0x0c7fu, 0x0c7fu}},
    {"HcclReduceScatter", "Ascend910B", {0x083fu, 0x003du, 0x083fu, 0x083fu}},
    {"HcclReduceScatter", "Ascend910_93", {0x083fu, 0x003du, 0x083fu, 0x083fu}},
    {"HcclReduceScatter", "Ascend950", {0x0c7fu, 0x047du, 0x0c7fu, 0x0c7fu}},
    {"HcclReduceScatterV", "Ascend910B", {0x081fu, 0x0000u, 0x081fu, 0x081fu}},
    {"HcclReduceScatterV", "Ascend910_93", {0x083fu, 0x0000u, 0x083fu, 0x083fu}},
    {"HcclReduceScatterV", "Ascend950", {0x083fu, 0x003du, 0x083fu, 0x083fu}},
};

/* A non-reducing API on a product: the dtypes it moves. */
struct HcclApiMoveRow {
    const char* api;
    const char* product;
    uint32_t dtypes;
};

static const HcclApiMoveRow kHcclApiMove[] = {
    {"HcclAllGather", "Ascend910B", 0x0fffu},
    {"HcclAllGather", "Ascend910_93", 0x0fffu},
    {"HcclAllGather", "Ascend950", 0x0fffu},
    {"HcclAllGatherV", "Ascend910B", 0x0fffu},
    {"HcclAllGatherV", "Ascend910_93", 0x0fffu},
    {"HcclAllGatherV", "Ascend950", 0x0fffu},
    {"HcclBroadcast", "Ascend910B", 0x0fffu},
    {"HcclBroadcast", "Ascend910_93", 0x0fffu},
    {"HcclBroadcast", "Ascend950", 0x0fffu},
    {"HcclScatter", "Ascend910B", 0x0fffu},
    {"HcclScatter", "Ascend910_93", 0x0fffu},
    {"HcclScatter", "Ascend950", 0x0fffu},
    {"HcclAlltoAll", "Ascend910B", 0x0fffu},
    {"HcclAlltoAll", "Ascend910_93", 0x0fffu},
    {"HcclAlltoAll", "Ascend950", 0x0fffu},
    {"HcclAlltoAllV", "Ascend910B", 0x0fffu},
    {"HcclAlltoAllV", "Ascend910_93", 0x0fffu},
    {"HcclAlltoAllV", "Ascend950", 0x0fffu},
    {"HcclAlltoAllVC", "Ascend910B", 0x0fffu},
    {"HcclAlltoAllVC", "Ascend910_93", 0x0fffu},
    {"HcclAlltoAllVC", "Ascend950", 0x0fffu},
    {"HcclSend", "Ascend910B", 0x0fffu},
    {"HcclSend", "Ascend910_93", 0x0fffu},
    {"HcclSend", "Ascend950", 0x0fffu},
    {"HcclRecv", "Ascend910B", 0x0fffu},
    {"HcclRecv", "Ascend910_93", 0x0fffu},
    {"HcclRecv", "Ascend950", 0x0fffu},
    {"HcclBatchSendRecv", "Ascend910B", 0x0fffu},
    {"HcclBatchSendRecv", "Ascend910_93", 0x0fffu},
    {"HcclBatchSendRecv", "Ascend950", 0x0fffu},
};

}  // namespace emu

#endif
