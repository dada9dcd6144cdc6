# AICPUConfig.cmake -- find_package(AICPU) for the CANN-shaped tree of the hcomm-kit emulator
# (installed as DIR/share/cmake/AICPU/).
#
# Adds the AICPU language (.aicpu sources: `extern "C" __global__ __aicpu__ uint32_t K(void *args)`).
# The emulator runs AICPU kernels on the host, so the AICPU compiler is the host C++ compiler with
# __global__ / __aicpu__ defined away, and kernels link against the emulator's device API
# (ccl_kernel = libhcomm_emu.so). Also provides the CANN variables and helper functions that CANN's
# custom-operator projects use (see hcomm_kit_cann.cmake).
get_filename_component(_HK_CANN_ROOT "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include("${_HK_CANN_ROOT}/share/cmake/hcomm_kit/hcomm_kit_cann.cmake")
set(AICPU_FOUND TRUE)
set(AICPU_VERSION "0")
