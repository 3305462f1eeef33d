# Optional sentencepiece support, for the opt-in header depthlab/data/tokenizer.hpp (the
# rest of depthlab never needs it: training reads token ids, see data/albert_data.hpp).
#
#   include(${PROJECT_SOURCE_DIR}/cmake/sentencepiece.cmake)
#   depthlab_find_sentencepiece()            # or depthlab_find_sentencepiece(REQUIRED)
#   if(TARGET depthlab::sentencepiece)
#     add_executable(depthlab_tokenizer_tests tests/main.cpp tests/test_tokenizer.cpp)
#     target_link_libraries(depthlab_tokenizer_tests PRIVATE
#       depthlab::depthlab depthlab::sentencepiece doctest::doctest)
#     target_compile_definitions(depthlab_tokenizer_tests PRIVATE
#       DEPTHLAB_FIXTURE_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures")
#     add_test(NAME depthlab_tokenizer_tests COMMAND depthlab_tokenizer_tests)
#   endif()
#
# Looks the library up with pkg-config (Debian: libsentencepiece-dev; the module is
# `sentencepiece`). When found, defines the global INTERFACE IMPORTED target
# depthlab::sentencepiece (include directories, -lsentencepiece -lsentencepiece_train, and
# the definition DEPTHLAB_HAVE_SENTENCEPIECE=1) and sets, in the caller's scope,
# DEPTHLAB_HAVE_SENTENCEPIECE (ON/OFF) and DEPTHLAB_SENTENCEPIECE_VERSION. Not found: a
# status message (a fatal error with REQUIRED) and no target. Calling it again is cheap.
include_guard(GLOBAL)

function(depthlab_find_sentencepiece)
  cmake_parse_arguments(ARG "REQUIRED" "" "" ${ARGN})
  if(NOT TARGET depthlab::sentencepiece)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(SENTENCEPIECE QUIET IMPORTED_TARGET GLOBAL sentencepiece)
    endif()
    if(SENTENCEPIECE_FOUND)
      add_library(depthlab::sentencepiece INTERFACE IMPORTED GLOBAL)
      target_link_libraries(depthlab::sentencepiece INTERFACE PkgConfig::SENTENCEPIECE)
      target_compile_definitions(depthlab::sentencepiece INTERFACE DEPTHLAB_HAVE_SENTENCEPIECE=1)
      set_property(GLOBAL PROPERTY DEPTHLAB_SENTENCEPIECE_VERSION "${SENTENCEPIECE_VERSION}")
      message(STATUS "depthlab: sentencepiece ${SENTENCEPIECE_VERSION} found (target depthlab::sentencepiece)")
    endif()
  endif()

  if(TARGET depthlab::sentencepiece)
    get_property(_version GLOBAL PROPERTY DEPTHLAB_SENTENCEPIECE_VERSION)
    set(DEPTHLAB_HAVE_SENTENCEPIECE ON PARENT_SCOPE)
    set(DEPTHLAB_SENTENCEPIECE_VERSION "${_version}" PARENT_SCOPE)
  else()
    set(DEPTHLAB_HAVE_SENTENCEPIECE OFF PARENT_SCOPE)
    set(DEPTHLAB_SENTENCEPIECE_VERSION "" PARENT_SCOPE)
    set(_msg "depthlab: sentencepiece not found via pkg-config (Debian: libsentencepiece-dev, scripts/setup)")
    if(ARG_REQUIRED)
      message(FATAL_ERROR "${_msg}")
    else()
      message(STATUS "${_msg}; depthlab/data/tokenizer.hpp and its test are skipped")
    endif()
  endif()
endfunction()
