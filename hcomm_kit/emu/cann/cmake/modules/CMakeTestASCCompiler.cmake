# The emulator's ASC compiler is a host C++ compiler (or a wrapper of one): nothing to probe.
set(CMAKE_ASC_COMPILER_WORKS 1 CACHE INTERNAL "")
