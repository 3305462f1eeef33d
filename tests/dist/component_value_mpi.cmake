# ctest -P script (dist_component_value): the study under mpirun -np 2 — training split by
# batches, decoding and the contribution / criticality modules split across the ranks — must
# write the same tables as one process with --accum 2 (the same global batches; no dropout,
# so that the ranks' dropout streams do not enter).
#   cmake -DMPIEXEC=mpirun -DEXE=<component_value> -DDATA=<tests/fixtures/translation_tiny> -DWORK=<dir> -P component_value_mpi.cmake
file(REMOVE_RECURSE "${WORK}")
set(common --data "${DATA}" --preset tiny --dropout 0 --steps 60 --lr 3e-3 --warmup 20 --log-every 30 --save-every 60 --dev-every 30
           --dev-sentences 10 --eval-sentences 20 --beam 2 --grid-steps 2 --prune-max-k 2 --rewind-k 0,1 --rewind-steps 2
           --max-tokens 256 --decode-batch 8)
execute_process(COMMAND "${EXE}" ${common} --accum 2 --out "${WORK}/one" OUTPUT_VARIABLE one ERROR_VARIABLE err1 RESULT_VARIABLE rc1)
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe "${EXE}" ${common} --out "${WORK}/two"
                OUTPUT_VARIABLE two ERROR_VARIABLE err2 RESULT_VARIABLE rc2 TIMEOUT 600)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR NOT two MATCHES "2 ranks \\(mpi\\)")
  message(FATAL_ERROR "component_value alone (rc ${rc1}) or under mpirun -np 2 (rc ${rc2}) failed:\n${one}\n${err1}\n${two}\n${err2}")
endif()
foreach(f test_hypotheses.txt contribution.csv criticality.csv criticality_trace.csv pruning.csv rewinding.csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/one/${f}" "${WORK}/two/${f}" RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "component_value: ${f} differs between 2 ranks and 1 process with --accum 2")
  endif()
endforeach()
foreach(run one two)
  string(REGEX MATCHALL "(step [0-9]+/[0-9]+[^\n]*lr [0-9.]+|dev BLEU [^\n]*|test BLEU [^(]*)" lines "${${run}}")
  set(${run}_lines "${lines}")
endforeach()
if(NOT one_lines STREQUAL two_lines OR one_lines STREQUAL "")
  message(FATAL_ERROR "component_value: the logs differ between 2 ranks and 1 process:\n${one_lines}\n---\n${two_lines}")
endif()
string(REGEX MATCH "test BLEU[^\n]*" bleu "${two}")
message(STATUS "component_value: mpirun -np 2 equals one process with --accum 2 (${bleu})")
