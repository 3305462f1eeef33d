# ctest -P script: component_value --device host_device (the CPU kernels behind a device
# interface) must train the same checkpoint, bit for bit, and write the same contribution,
# criticality, pruning and rewinding tables as --device cpu; so must the analyses of the cpu
# checkpoint under the mean and resample ablation kinds (their tables name the kind), and the
# head-level analyses.
#   cmake -DEXE=<component_value> -DDATA=<tests/fixtures/translation_tiny> -DWORK=<dir> -P component_value_device.cmake
file(REMOVE_RECURSE "${WORK}")
set(common --data "${DATA}" --preset tiny --steps 200 --lr 3e-3 --warmup 50 --log-every 100 --save-every 200 --dev-every 0
           --dev-sentences 10 --eval-sentences 20 --beam 2 --grid-steps 2 --prune-max-k 2 --rewind-k 0,1 --rewind-steps 2
           --max-tokens 512)
foreach(device cpu host_device)
  execute_process(COMMAND "${EXE}" ${common} --device ${device} --out "${WORK}/${device}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "device ${device}")
    message(FATAL_ERROR "component_value --device ${device} failed (rc ${rc}):\n${out}\n${err}")
  endif()
endforeach()
string(REGEX MATCH "test BLEU[^\n]*" bleu "${out}")
foreach(f checkpoint.safetensors contribution.csv contribution_ci.csv criticality.csv pruning.csv rewinding.csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/cpu/${f}" "${WORK}/host_device/${f}" RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "component_value: ${f} differs between --device cpu and --device host_device")
  endif()
endforeach()
message(STATUS "component_value: cpu and host_device agree bit for bit (${bleu})")
foreach(kind mean resample)
  foreach(device cpu host_device)
    execute_process(COMMAND "${EXE}" ${common} --device ${device} --checkpoint "${WORK}/cpu/checkpoint.safetensors" --ablation ${kind}
                            --ablation-batches 2 --out "${WORK}/${kind}_${device}"
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "component_value --ablation ${kind} --device ${device} failed (rc ${rc}):\n${out}\n${err}")
    endif()
  endforeach()
  file(STRINGS "${WORK}/${kind}_cpu/contribution.csv" header LIMIT_COUNT 1)
  if(NOT header STREQUAL "module,type,layer,metric_without_${kind},score")
    message(FATAL_ERROR "component_value --ablation ${kind}: contribution.csv header '${header}'")
  endif()
  foreach(f contribution.csv pruning.csv)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/${kind}_cpu/${f}" "${WORK}/${kind}_host_device/${f}" RESULT_VARIABLE differ)
    if(NOT differ EQUAL 0)
      message(FATAL_ERROR "component_value --ablation ${kind}: ${f} differs between --device cpu and --device host_device")
    endif()
  endforeach()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/cpu/contribution.csv" "${WORK}/${kind}_cpu/contribution.csv" RESULT_VARIABLE differ)
  if(differ EQUAL 0)
    message(FATAL_ERROR "component_value --ablation ${kind}: the same contribution table as zero ablation")
  endif()
  message(STATUS "component_value --ablation ${kind}: cpu and host_device agree")
endforeach()
# --granularity head: every attention head's contribution, gradient importance and pruning
foreach(device cpu host_device)
  execute_process(COMMAND "${EXE}" ${common} --device ${device} --checkpoint "${WORK}/cpu/checkpoint.safetensors" --granularity head
                          --ablation-batches 2 --out "${WORK}/head_${device}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "heads: 24;")
    message(FATAL_ERROR "component_value --granularity head --device ${device} failed (rc ${rc}):\n${out}\n${err}")
  endif()
endforeach()
foreach(f head_contribution.csv head_criticality.csv head_importance.csv head_pruning.csv scores_agreement.csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/head_cpu/${f}" "${WORK}/head_host_device/${f}" RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "component_value --granularity head: ${f} differs between --device cpu and --device host_device")
  endif()
endforeach()
message(STATUS "component_value --granularity head: cpu and host_device agree")
