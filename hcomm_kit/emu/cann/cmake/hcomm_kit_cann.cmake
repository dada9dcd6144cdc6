# hcomm_kit_cann.cmake -- shared part of the ASC and AICPU packages of the hcomm-kit emulator tree.
#
# * puts the ASC and AICPU language modules on CMAKE_MODULE_PATH (project(... LANGUAGES CXX AICPU ASC));
# * ASCEND_CANN_PACKAGE_PATH / ASCEND_HOME_PATH default to this tree;
# * the custom-operator install layout of CANN's HCCL build (CUSTOM_OPS_OPP_*_PATH, vendor "cust"),
#   unless the including project set them;
# * cann_pack_targets_and_files, add_cann_sign_file and register_custom_aicpu_target, unless the
#   project defines its own (CANN's hccl repository does, in cmake/): here the AICPU package is a
#   plain tar.gz (no CMS signature: the emulator loads no signed packages), and the host-built
#   kernel libraries are installed beside it, in opp/vendors/<vendor>/aicpu/kernel, where the
#   emulator loads them.
if(_HK_CANN_INCLUDED)
    return()
endif()
set(_HK_CANN_INCLUDED TRUE)
get_filename_component(_HK_CANN_ROOT "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}/modules")

if(NOT DEFINED ASCEND_CANN_PACKAGE_PATH)
    set(ASCEND_CANN_PACKAGE_PATH "${_HK_CANN_ROOT}")
endif()
if(NOT DEFINED ASCEND_HOME_PATH)
    set(ASCEND_HOME_PATH "${_HK_CANN_ROOT}")
endif()
if(NOT DEFINED CUSTOM_OPS_VENDOR)
    set(CUSTOM_OPS_VENDOR "cust")
endif()
foreach(_hk_pair
        "CUSTOM_OPS_OPP_PATH;opp/vendors/${CUSTOM_OPS_VENDOR}"
        "CUSTOM_OPS_OPP_INC_PATH;opp/vendors/${CUSTOM_OPS_VENDOR}/include"
        "CUSTOM_OPS_OPP_LIB_PATH;opp/vendors/${CUSTOM_OPS_VENDOR}/lib64"
        "CUSTOM_OPS_OPP_SCRIPTS_PATH;opp/vendors/${CUSTOM_OPS_VENDOR}/scripts"
        "CUSTOM_OPS_OPP_AICPU_CONFIG_PATH;opp/vendors/${CUSTOM_OPS_VENDOR}/aicpu/config"
        "CUSTOM_OPS_OPP_AICPU_KERNEL_PATH;opp/vendors/${CUSTOM_OPS_VENDOR}/aicpu/kernel")
    list(GET _hk_pair 0 _hk_var)
    list(GET _hk_pair 1 _hk_val)
    if(NOT DEFINED ${_hk_var})
        set(${_hk_var} "${_hk_val}")
    endif()
endforeach()
if(NOT DEFINED BUILD_DEVICE_DIR)
    # CANN's build runs a device pass (KERNEL_MODE) into build_device/ before the host pass.
    set(BUILD_DEVICE_DIR "${CMAKE_BINARY_DIR}")
endif()
# Install into this tree by default (CANN's build installs custom operators into the CANN install).
if(NOT DEFINED CMAKE_INSTALL_PREFIX)  # find_package before project(): nothing set yet
    set(CMAKE_INSTALL_PREFIX "${_HK_CANN_ROOT}" CACHE PATH "install into the emulator's CANN tree")
elseif(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
    set(CMAKE_INSTALL_PREFIX "${_HK_CANN_ROOT}" CACHE PATH "install into the emulator's CANN tree" FORCE)
endif()

if(NOT COMMAND cann_pack_targets_and_files)
    # cann_pack_targets_and_files(OUTPUT_TARGET t OUTPUT pkg.tar.gz TARGETS k... [MANIFEST m] [TAR_ROOT_DIR d])
    function(cann_pack_targets_and_files)
        cmake_parse_arguments(P "" "OUTPUT_TARGET;OUTPUT;MANIFEST;TAR_ROOT_DIR" "TARGETS;FILES" ${ARGN})
        if(NOT P_TAR_ROOT_DIR)
            set(P_TAR_ROOT_DIR "aicpu_kernels_device")
        endif()
        set(_stage "${CMAKE_BINARY_DIR}/_hk_pack/${P_OUTPUT_TARGET}")
        set(_cmds COMMAND ${CMAKE_COMMAND} -E rm -rf "${_stage}" COMMAND ${CMAKE_COMMAND} -E make_directory
                  "${_stage}/${P_TAR_ROOT_DIR}")
        foreach(_t IN LISTS P_TARGETS)
            list(APPEND _cmds COMMAND ${CMAKE_COMMAND} -E copy "$<TARGET_FILE:${_t}>" "${_stage}/${P_TAR_ROOT_DIR}/")
        endforeach()
        foreach(_f IN LISTS P_FILES)
            list(APPEND _cmds COMMAND ${CMAKE_COMMAND} -E copy "${_f}" "${_stage}/${P_TAR_ROOT_DIR}/")
        endforeach()
        add_custom_target(${P_OUTPUT_TARGET} ALL ${_cmds}
            COMMAND ${CMAKE_COMMAND} -E chdir "${_stage}" ${CMAKE_COMMAND} -E tar czf "${CMAKE_BINARY_DIR}/${P_OUTPUT}"
                    "${P_TAR_ROOT_DIR}"
            DEPENDS ${P_TARGETS}
            COMMENT "hcomm-kit: packing ${P_OUTPUT} (unsigned; the emulator loads the kernel libraries themselves)")
        set_property(GLOBAL APPEND PROPERTY _HK_PACKAGE_TARGETS ${P_TARGETS})
        set_property(GLOBAL PROPERTY _HK_PACKAGE_OF_${P_OUTPUT} "${CMAKE_BINARY_DIR}/${P_OUTPUT}")
    endfunction()
endif()

if(NOT COMMAND add_cann_sign_file)
    # add_cann_sign_file(INPUT pkg.tar.gz [CONFIG xml] [RESULT_VAR v] [DEPENDS t]): defines target
    # sign_<pkg> that copies the package to ${BUILD_DEVICE_DIR}/signatures/ (no CMS signature).
    function(add_cann_sign_file)
        cmake_parse_arguments(S "" "INPUT;CONFIG;RESULT_VAR" "DEPENDS" ${ARGN})
        get_filename_component(_name "${S_INPUT}" NAME)
        string(REGEX REPLACE "\\.tar\\.gz$" "" _stem "${_name}")
        get_property(_pkg GLOBAL PROPERTY _HK_PACKAGE_OF_${_name})
        if(NOT _pkg)
            set(_pkg "${CMAKE_BINARY_DIR}/${_name}")
        endif()
        set(_out "${BUILD_DEVICE_DIR}/signatures/${_name}")
        add_custom_target(sign_${_stem} ALL
            COMMAND ${CMAKE_COMMAND} -E make_directory "${BUILD_DEVICE_DIR}/signatures"
            COMMAND ${CMAKE_COMMAND} -E copy "${_pkg}" "${_out}"
            DEPENDS ${S_DEPENDS}
            COMMENT "hcomm-kit: ${_name} is not signed (the emulator needs no signature)")
        if(S_RESULT_VAR)
            set(${S_RESULT_VAR} "${_out}" PARENT_SCOPE)
        endif()
    endfunction()
endif()

if(NOT COMMAND register_custom_aicpu_target)
    # register_custom_aicpu_target(t): builds t with the device pass and installs the host-built
    # kernel libraries of every packed target, plus their package, into the AICPU kernel directory.
    function(register_custom_aicpu_target t)
        if(TARGET custom_aicpu)
            add_dependencies(custom_aicpu ${t})
        endif()
        get_property(_kernels GLOBAL PROPERTY _HK_PACKAGE_TARGETS)
        foreach(_k IN LISTS _kernels)
            install(TARGETS ${_k} LIBRARY DESTINATION "${CUSTOM_OPS_OPP_AICPU_KERNEL_PATH}" COMPONENT hccl)
        endforeach()
        set_property(GLOBAL PROPERTY _HK_PACKAGE_TARGETS "")
    endfunction()
endif()
