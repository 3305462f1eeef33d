# cmake -DBUILD_DIR=<depthlab build dir> -DPREFIX=<prefix> [-DCONFIG=<cfg>] -P install.cmake
# Installs the depthlab build tree into a fresh prefix (fixture of packaging_find_package).
foreach(v BUILD_DIR PREFIX)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "install.cmake: ${v} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${PREFIX}")
set(cfg)
if(DEFINED CONFIG AND NOT "${CONFIG}" STREQUAL "")
  set(cfg --config "${CONFIG}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${cfg}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} failed (${rc})")
endif()

file(GLOB_RECURSE configs "${PREFIX}/*/depthlabConfig.cmake")
file(GLOB_RECURSE umbrella "${PREFIX}/include/depthlab/depthlab.hpp")
if(NOT configs OR NOT umbrella)
  message(FATAL_ERROR "install into ${PREFIX} lacks depthlabConfig.cmake or include/depthlab/depthlab.hpp")
endif()
message(STATUS "installed depthlab into ${PREFIX}: ${configs}")
