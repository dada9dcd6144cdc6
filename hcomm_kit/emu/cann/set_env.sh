#!/bin/bash
# set_env.sh -- environment of the hcomm-kit emulator's CANN-shaped tree (like CANN's set_env.sh):
#     source <tree>/set_env.sh
# Programs built against this tree then run on the CPU emulator. The emulated product and the
# number of devices come from HCOMM_KIT_SOC (Ascend910B, Ascend910_93, Ascend950) and
# HCOMM_KIT_DEVICE_COUNT (default 8); see `hcomm-kit doctor --env`.
_hk_src="${BASH_SOURCE[0]:-$0}"
_hk_home="$(cd "$(dirname "${_hk_src}")" && pwd)"
if [ "$(basename "${_hk_home}")" = "bin" ]; then
    _hk_home="$(dirname "${_hk_home}")"
fi
export ASCEND_HOME_PATH="${_hk_home}"
export ASCEND_TOOLKIT_HOME="${_hk_home}"
export ASCEND_OPP_PATH="${_hk_home}/opp"
export ASCEND_AICPU_PATH="${_hk_home}"
export TOOLCHAIN_HOME="${_hk_home}/toolkit"
export LD_LIBRARY_PATH="${_hk_home}/lib64:${_hk_home}/devlib/device${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export PATH="${_hk_home}/bin:${PATH}"
export CMAKE_PREFIX_PATH="${_hk_home}${CMAKE_PREFIX_PATH:+:${CMAKE_PREFIX_PATH}}"
unset _hk_src _hk_home
