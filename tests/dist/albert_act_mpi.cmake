# ctest -P script (dist_albert_act): the example unchanged under mpirun. 2 ranks x batch 4 must
# give the same model as one process x batch 4 x --accum 2 (the same global batches): equal
# progress lines and dev evaluations, and halting.csv / fixed_point.csv equal byte for byte
# (they come from the final model). Rank 0 alone writes them.
#   cmake -DMPIEXEC=mpirun -DEXE=<albert_act> -DDATA=<tests/fixtures/albert_tiny> -DWORK=<dir> -P albert_act_mpi.cmake
file(REMOVE_RECURSE "${WORK}")
set(common --data "${DATA}" --steps 8 --batch 4 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --log-every 4
           --eval-every 4 --dev-batches 2 --save-every 4)
execute_process(COMMAND "${EXE}" ${common} --accum 2 --out "${WORK}/one" OUTPUT_VARIABLE one ERROR_VARIABLE err1 RESULT_VARIABLE rc1)
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe "${EXE}" ${common} --out "${WORK}/two"
                OUTPUT_VARIABLE two ERROR_VARIABLE err2 RESULT_VARIABLE rc2 TIMEOUT 300)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR NOT two MATCHES "2 ranks \\(mpi\\) \\(global batch 8\\)")
  message(FATAL_ERROR "albert_act alone (rc ${rc1}) or under mpirun -np 2 (rc ${rc2}) failed:\n${one}\n${err1}\n${two}\n${err2}")
endif()
foreach(f halting.csv fixed_point.csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/one/${f}" "${WORK}/two/${f}" RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "albert_act: ${f} differs between 2 ranks and 1 process with --accum 2")
  endif()
endforeach()
# The progress lines without their rates, and the dev lines, must be the same.
foreach(run one two)
  string(REGEX MATCHALL "(step [0-9]+/[0-9]+[^\n]*lr [0-9.]+|dev @[^\n]*)" lines "${${run}}")
  set(${run}_lines "${lines}")
endforeach()
if(NOT one_lines STREQUAL two_lines OR one_lines STREQUAL "")
  message(FATAL_ERROR "albert_act: the logs differ between 2 ranks and 1 process:\n${one_lines}\n---\n${two_lines}")
endif()
message(STATUS "albert_act: mpirun -np 2 equals one process with --accum 2 (logs, halting.csv, fixed_point.csv)")
