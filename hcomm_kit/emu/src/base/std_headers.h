/* The standard headers most of the emulator's translation units read, precompiled once per build
 * (hcomm_kit/build/emulator.py with g++, tests/fuzz/harness.py with clang: every unit is compiled
 * with `-include` of this header's precompiled form, a fifth less compile time per variant).
 * Nothing else belongs here: each source still includes what it uses, so it builds without the
 * precompiled header too (another compiler, a failed precompile). */
#ifndef HCOMM_KIT_EMU_STD_HEADERS_H
#define HCOMM_KIT_EMU_STD_HEADERS_H

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#endif
