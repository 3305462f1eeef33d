# ctest -P script: every gemm_args is written with designated initialisers
# (gemm_args{.m = ..., .n = ...}): sixteen positional integers are a wrong lda waiting to happen.
#   cmake -DROOT=<repository> -P designated_gemm_args.cmake
file(GLOB_RECURSE sources ${ROOT}/include/*.hpp ${ROOT}/include/*.cuh ${ROOT}/include/*.inl ${ROOT}/src/*.cpp ${ROOT}/src/*.cu
     ${ROOT}/tests/*.cpp ${ROOT}/tests/*.hpp ${ROOT}/tests/*.cu ${ROOT}/bench/*.cpp ${ROOT}/bench/*.cu ${ROOT}/examples/*.cpp
     ${ROOT}/examples/*.hpp ${ROOT}/examples/*.cu ${ROOT}/docs/tutorial/*.cpp)
set(found "")
foreach(f ${sources})
  file(READ "${f}" text)
  string(REPLACE "struct gemm_args" "struct (the definition)" text "${text}")
  # gemm_args{x, gemm_args name{x, gemm_args name = {x, with the brace's first item on the
  # same line or the next: anything but a designator (.field), a close brace or a comment
  string(REGEX MATCHALL "gemm_args[ \t]*[A-Za-z_0-9]*[ \t]*=?[ \t]*{[ \t\n]*[^./} \t\n][^\n]*" hits "${text}")
  foreach(hit ${hits})
    string(APPEND found "\n  ${f}: ${hit}")
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "positional gemm_args (name the fields: gemm_args{.m = ..., ...}):${found}")
endif()
list(LENGTH sources n)
message(STATUS "gemm_args: designated initialisers in all ${n} sources")
