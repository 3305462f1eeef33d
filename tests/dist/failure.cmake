# Failure behaviour of a data-parallel job (ctest dist_failure):
#   kill  the last rank dies (SIGKILL) at its 4th step: mpirun must end the job, non-zero;
#   hang  the last rank stops calling collectives: the other must give up after
#         DEPTHLAB_DIST_TIMEOUT seconds with an error naming the collective, and end the job.
# Either way the job must end well within the limit (not hang), and the checkpoint rank 0
# wrote (every step) must load.
#   cmake -DMPIEXEC=mpirun -DEXE=depthlab_dist_tests -DWORK=<dir> -P failure.cmake
foreach(mode kill hang)
  set(dir "${WORK}/dist_failure_${mode}")
  file(REMOVE_RECURSE "${dir}")
  string(TIMESTAMP t0 "%s")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env DEPTHLAB_DIST_FAILURE=${mode} "DEPTHLAB_DIST_FAILURE_DIR=${dir}" DEPTHLAB_DIST_TIMEOUT=5
            ${MPIEXEC} -np 2 --oversubscribe "${EXE}" "--test-case=failure: a rank that dies*"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  string(TIMESTAMP t1 "%s")
  math(EXPR seconds "${t1} - ${t0}")
  if(rc EQUAL 0 OR rc MATCHES "timeout")
    message(FATAL_ERROR "dist_failure (${mode}): the job did not fail as it should (result '${rc}' after ${seconds} s)\n${out}\n${err}")
  endif()
  if(mode STREQUAL "hang" AND NOT err MATCHES "did not complete in 5 s")
    message(FATAL_ERROR "dist_failure (hang): no timeout error naming the collective\n${out}\n${err}")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env "DEPTHLAB_DIST_CHECK_DIR=${dir}" "${EXE}" "--test-case=failure: the checkpoint left*"
    RESULT_VARIABLE check OUTPUT_VARIABLE cout ERROR_VARIABLE cerr TIMEOUT 120)
  if(NOT check EQUAL 0)
    message(FATAL_ERROR "dist_failure (${mode}): the checkpoint left behind does not load\n${cout}\n${cerr}")
  endif()
  string(REGEX MATCH "[^\n]*(did not complete|noticed that process)[^\n]*" why "${err}${out}")
  message(STATUS "dist_failure (${mode}): the job ended with '${rc}' after ${seconds} s: ${why}")
  file(REMOVE_RECURSE "${dir}")
endforeach()
