# ASCConfig.cmake -- find_package(ASC) for the CANN-shaped tree of the hcomm-kit emulator
# (written by `hcomm-kit config --ascend-home DIR`, installed as DIR/share/cmake/ASC/).
#
# Adds the ASC language (.asc sources, Ascend C). On the emulator, .asc files are host code:
# bin/hk-asc compiles them with the host C++ compiler and turns the launch of an AICPU kernel,
# `Kernel<<<numBlocks, l2ctrl, stream>>>(args, size)`, into a launch on the emulator
# (hcomm_kit/asc_launch.h). AI Core (vector/cube) kernels are not emulated: hk-asc stops with a
# message naming the file. Also provides the CANN variables and helper functions that CANN's
# custom-operator projects use (see hcomm_kit_cann.cmake).
get_filename_component(_HK_CANN_ROOT "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include("${_HK_CANN_ROOT}/share/cmake/hcomm_kit/hcomm_kit_cann.cmake")
set(CMAKE_ASC_COMPILER "${_HK_CANN_ROOT}/bin/hk-asc" CACHE FILEPATH "ASC compiler (hcomm-kit emulator)")
set(ASC_FOUND TRUE)
set(ASC_VERSION "0")
