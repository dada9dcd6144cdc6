# The emulator's AICPU compiler is a host C++ compiler (or a wrapper of one): nothing to probe.
set(CMAKE_AICPU_COMPILER_WORKS 1 CACHE INTERNAL "")
