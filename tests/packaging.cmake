# Packaging tests, included from tests/CMakeLists.txt:
#     include(${CMAKE_CURRENT_SOURCE_DIR}/packaging.cmake)
#
# Tests (all labelled "packaging"):
#   packaging_install          cmake --install <build> into <build>/packaging/prefix  (FIXTURES_SETUP depthlab_installed)
#   packaging_find_package     tests/consumer via find_package(depthlab)              (FIXTURES_REQUIRED depthlab_installed)
#   packaging_subdirectory     tests/consumer via add_subdirectory(<depthlab src>)
#   single_include_fresh       scripts/amalgamate output == single_include/depthlab/depthlab.hpp
#   single_include_smoke       runs the single_include_smoke executable (single header only)

set(_dl_pkg_dir "${CMAKE_CURRENT_LIST_DIR}/packaging")
set(_dl_pkg_bin "${CMAKE_BINARY_DIR}/packaging")
set(_dl_pkg_timeout 900)

# What the consumer builds must share with this build.
set(_dl_pkg_common
  "-DGENERATOR=${CMAKE_GENERATOR}"
  "-DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}"
  "-DCXX_COMPILER=${CMAKE_CXX_COMPILER}"
  "-DCXX_COMPILER_ID=${CMAKE_CXX_COMPILER_ID}"
  "-DCXX_FLAGS=${CMAKE_CXX_FLAGS}"
  "-DCXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}"
  "-DBUILD_TYPE=$<CONFIG>"
  "-DWITH_ONEDNN=${DEPTHLAB_WITH_ONEDNN}"
  "-DEXPECTED_VERSION=${PROJECT_VERSION}"
  "-DCONSUMER_SOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}/consumer")
# Lists are passed '|'-separated (add_test would split on ';').
string(REPLACE ";" "|" _dl_pkg_prefix_path "${CMAKE_PREFIX_PATH}")
list(APPEND _dl_pkg_common "-DPREFIX_PATH=${_dl_pkg_prefix_path}")
set(_dl_pkg_hints)
foreach(_dl_var Eigen3_DIR dnnl_DIR OpenCL_INCLUDE_DIR OpenCL_LIBRARY CUDAToolkit_ROOT)
  if(${_dl_var})
    list(APPEND _dl_pkg_hints "${_dl_var}=${${_dl_var}}")
  endif()
endforeach()
string(REPLACE ";" "|" _dl_pkg_hints "${_dl_pkg_hints}")
list(APPEND _dl_pkg_common "-DHINTS=${_dl_pkg_hints}")

# (a) install + find_package. Only meaningful when depthlab is the top-level project
#     (cmake --install of CMAKE_BINARY_DIR would install the parent project otherwise).
if(DEPTHLAB_INSTALL AND CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  add_test(NAME packaging_install
    COMMAND "${CMAKE_COMMAND}"
      "-DBUILD_DIR=${CMAKE_BINARY_DIR}"
      "-DPREFIX=${_dl_pkg_bin}/prefix"
      "-DCONFIG=$<CONFIG>"
      -P "${_dl_pkg_dir}/install.cmake")
  set_tests_properties(packaging_install PROPERTIES
    LABELS packaging
    FIXTURES_SETUP depthlab_installed
    RESOURCE_LOCK depthlab_packaging_prefix
    TIMEOUT 120)

  add_test(NAME packaging_find_package
    COMMAND "${CMAKE_COMMAND}" ${_dl_pkg_common}
      -DMODE=find_package
      "-DPREFIX=${_dl_pkg_bin}/prefix"
      "-DCONSUMER_BINARY_DIR=${_dl_pkg_bin}/consumer-find_package"
      -P "${_dl_pkg_dir}/consumer.cmake")
  set_tests_properties(packaging_find_package PROPERTIES
    LABELS packaging
    FIXTURES_REQUIRED depthlab_installed
    RESOURCE_LOCK depthlab_packaging_prefix
    TIMEOUT ${_dl_pkg_timeout})
endif()

# (b) add_subdirectory.
add_test(NAME packaging_subdirectory
  COMMAND "${CMAKE_COMMAND}" ${_dl_pkg_common}
    -DMODE=subdirectory
    "-DDEPTHLAB_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
    "-DCONSUMER_BINARY_DIR=${_dl_pkg_bin}/consumer-subdirectory"
    -P "${_dl_pkg_dir}/consumer.cmake")
set_tests_properties(packaging_subdirectory PROPERTIES
  LABELS packaging
  TIMEOUT ${_dl_pkg_timeout})

# (c) The committed single header is what scripts/amalgamate generates now.
find_package(Python3 3.9 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME single_include_fresh
    COMMAND "${CMAKE_COMMAND}"
      "-DPython3_EXECUTABLE=${Python3_EXECUTABLE}"
      "-DSOURCE_DIR=${PROJECT_SOURCE_DIR}"
      "-DOUTPUT=${_dl_pkg_bin}/single_include/depthlab.hpp"
      -P "${_dl_pkg_dir}/single_include_fresh.cmake")
  set_tests_properties(single_include_fresh PROPERTIES LABELS packaging TIMEOUT 120)
else()
  message(STATUS "depthlab: python3 >= 3.9 not found; test single_include_fresh is not registered")
endif()

# (d) The single header compiles on its own: include path single_include/ only, the
#     dependencies' targets, and NOT the depthlab target.
if(EXISTS "${PROJECT_SOURCE_DIR}/single_include/depthlab/depthlab.hpp")
  add_executable(single_include_smoke "${CMAKE_CURRENT_LIST_DIR}/single_include_smoke.cpp")
  target_include_directories(single_include_smoke PRIVATE "${PROJECT_SOURCE_DIR}/single_include")
  target_compile_features(single_include_smoke PRIVATE cxx_std_20)
  target_compile_definitions(single_include_smoke PRIVATE
    "DEPTHLAB_EXPECTED_VERSION=\"${PROJECT_VERSION}\"")
  target_link_libraries(single_include_smoke PRIVATE Eigen3::Eigen OpenMP::OpenMP_CXX nlohmann_json::nlohmann_json)
  if(DEPTHLAB_WITH_ONEDNN)
    target_link_libraries(single_include_smoke PRIVATE DNNL::dnnl)
    target_compile_definitions(single_include_smoke PRIVATE DEPTHLAB_HAVE_ONEDNN=1)
  endif()
  if(DEPTHLAB_WITH_CUDA)
    target_link_libraries(single_include_smoke PRIVATE CUDA::cudart)
    target_compile_definitions(single_include_smoke PRIVATE DEPTHLAB_HAVE_CUDA=1)
  endif()
  add_test(NAME single_include_smoke COMMAND single_include_smoke)
  set_tests_properties(single_include_smoke PROPERTIES
    LABELS packaging
    TIMEOUT 60)
else()
  message(WARNING "depthlab: single_include/depthlab/depthlab.hpp is missing: run scripts/amalgamate")
endif()
