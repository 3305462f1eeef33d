# ctest -P script: every gemm_args is written with designated initialisers
# (gemm_args{.m = ..., .n = ...}): sixteen positional integers are a wrong lda waiting to happen.
#   cmake -DROOT=<repository> -P designated_gemm_args.cmake
file(GLOB_RECURSE sources ${ROOT}/include/*.hpp ${ROOT}/include/*.cuh ${ROOT}/src/*.cpp ${ROOT}/src/*.cu
     ${ROOT}/tests/*.cpp ${ROOT}/tests/*.cu ${ROOT}/bench/*.cpp ${ROOT}/examples/*.cpp ${ROOT}/examples/*.hpp)
set(found "")
foreach(f ${sources})
  file(STRINGS "${f}" lines REGEX "gemm_args[ \t]*[A-Za-z_0-9]*[ \t]*{[ \t]*[^.} \t]")
  foreach(line ${lines})
    string(APPEND found "\n  ${f}: ${line}")
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "positional gemm_args (name the fields: gemm_args{.m = ..., ...}):${found}")
endif()
list(LENGTH sources n)
message(STATUS "gemm_args: designated initialisers in all ${n} sources")
