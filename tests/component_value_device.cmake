# ctest -P script: component_value --device host_device (the CPU kernels behind a device
# interface) must train the same checkpoint, bit for bit, and write the same contribution,
# criticality, pruning and rewinding tables as --device cpu; so must the analyses of the cpu
# checkpoint under the mean and resample ablation kinds (their tables name the kind), and the
# head-level analyses (mean kind).
#   cmake -DEXE=<component_value> -DDATA=<tests/fixtures/translation_tiny> -DWORK=<dir> -P component_value_device.cmake
file(REMOVE_RECURSE "${WORK}")
set(common --data "${DATA}" --preset tiny --steps 200 --lr 3e-3 --warmup 50 --log-every 100 --save-every 200 --dev-every 0
           --dev-sentences 10 --eval-sentences 20 --beam 2 --grid-steps 2 --prune-max-k 2 --rewind-k 0,1 --rewind-steps 2
           --max-tokens 512)
# component_value on both devices with `args`, into ${WORK}/<tag>_<device> (<device> alone
# for an empty tag); the last run's stdout in `out`
function(run_both tag)
  foreach(device cpu host_device)
    set(dir "${WORK}/${device}")
    if(tag)
      set(dir "${WORK}/${tag}_${device}")
    endif()
    execute_process(COMMAND "${EXE}" ${common} --device ${device} ${ARGN} --out "${dir}"
                    OUTPUT_VARIABLE stdout ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0 OR NOT stdout MATCHES "device ${device}")
      message(FATAL_ERROR "component_value ${ARGN} --device ${device} failed (rc ${rc}):\n${stdout}\n${err}")
    endif()
  endforeach()
  set(out "${stdout}" PARENT_SCOPE)
endfunction()
# the listed files of the cpu and host_device runs of `tag` must be identical
function(expect_same tag)
  set(prefix "${WORK}/")
  if(tag)
    set(prefix "${WORK}/${tag}_")
  endif()
  foreach(f ${ARGN})
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${prefix}cpu/${f}" "${prefix}host_device/${f}" RESULT_VARIABLE differ)
    if(NOT differ EQUAL 0)
      message(FATAL_ERROR "component_value ${tag}: ${f} differs between --device cpu and --device host_device")
    endif()
  endforeach()
endfunction()

run_both("")
string(REGEX MATCH "test BLEU[^\n]*" bleu "${out}")
expect_same("" checkpoint.safetensors contribution.csv contribution_ci.csv criticality.csv pruning.csv rewinding.csv iso_flop.csv criticality_ci.csv)
file(STRINGS "${WORK}/cpu/iso_flop.csv" iso)
list(LENGTH iso rows)
list(GET iso 0 header)
# the header, the full model, and 2 pruned models by each score (--prune-max-k 2)
if(NOT header STREQUAL "model,modules_removed,flops_per_token,bleu" OR NOT rows EQUAL 6)
  message(FATAL_ERROR "component_value: iso_flop.csv has header '${header}' and ${rows} lines, expected 6:\n${iso}")
endif()
message(STATUS "component_value: cpu and host_device agree bit for bit (${bleu})")
set(trained --checkpoint "${WORK}/cpu/checkpoint.safetensors" --ablation-batches 2)
foreach(kind mean resample)
  run_both(${kind} ${trained} --ablation ${kind})
  file(STRINGS "${WORK}/${kind}_cpu/contribution.csv" header LIMIT_COUNT 1)
  if(NOT header STREQUAL "module,type,layer,metric_without_${kind},score")
    message(FATAL_ERROR "component_value --ablation ${kind}: contribution.csv header '${header}'")
  endif()
  expect_same(${kind} contribution.csv pruning.csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/cpu/contribution.csv" "${WORK}/${kind}_cpu/contribution.csv" RESULT_VARIABLE differ)
  if(differ EQUAL 0)
    message(FATAL_ERROR "component_value --ablation ${kind}: the same contribution table as zero ablation")
  endif()
  message(STATUS "component_value --ablation ${kind}: cpu and host_device agree")
endforeach()
# --granularity head: every attention head's contribution, criticality, gradient importance and
# pruning, heads switched off with the mean kind (zero: the unit tests)
run_both(head ${trained} --granularity head --ablation mean)
if(NOT out MATCHES "heads: 24;")
  message(FATAL_ERROR "component_value --granularity head: no head line in\n${out}")
endif()
expect_same(head head_contribution.csv head_criticality.csv head_importance.csv head_pruning.csv scores_agreement.csv)
message(STATUS "component_value --granularity head: cpu and host_device agree")
