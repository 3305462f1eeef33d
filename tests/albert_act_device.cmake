# ctest -P script: albert_act --device host_device (the CPU kernels behind a device interface:
# no element access, uploads and downloads explicit) must write the same checkpoint, bit for
# bit, and the same halting table as --device cpu, for ACT (compact path) and PonderNet. The
# compact path on a device reads which tokens run once per forward by default and computes the
# tokens halted since with weight 0: the same values, but its gradients' sums over rows meet
# other row counts, so the last bits may differ; --host-reads -1 (a read after every iteration,
# the CPU's schedule) makes the rows the CPU's. The default schedule runs once more below.
#   cmake -DEXE=<albert_act> -DDATA=<tests/fixtures/albert_tiny> -DWORK=<dir> -P albert_act_device.cmake
file(REMOVE_RECURSE "${WORK}")
set(common --data "${DATA}" --steps 8 --batch 8 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --log-every 4
           --eval-every 4 --dev-batches 2 --save-every 8 --host-reads -1)
foreach(policy act pondernet)
  foreach(device cpu host_device)
    execute_process(COMMAND "${EXE}" ${common} --policy ${policy} --device ${device} --out "${WORK}/${policy}_${device}"
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0 OR NOT out MATCHES "device ${device}")
      message(FATAL_ERROR "albert_act --policy ${policy} --device ${device} failed (rc ${rc}):\n${out}\n${err}")
    endif()
  endforeach()
  foreach(f checkpoint.safetensors halting.csv fixed_point.csv iso_flop.csv)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/${policy}_cpu/${f}" "${WORK}/${policy}_host_device/${f}"
                    RESULT_VARIABLE differ)
    if(NOT differ EQUAL 0)
      message(FATAL_ERROR "albert_act --policy ${policy}: ${f} differs between --device cpu and --device host_device")
    endif()
  endforeach()
endforeach()
message(STATUS "albert_act: cpu and host_device agree bit for bit (act, pondernet)")

# the default schedule on the device: a run that trains, evaluates and writes its checkpoint
list(REMOVE_ITEM common --host-reads -1)
execute_process(COMMAND "${EXE}" ${common} --policy act --device host_device --out "${WORK}/act_host_device_reads1"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT EXISTS "${WORK}/act_host_device_reads1/checkpoint.safetensors")
  message(FATAL_ERROR "albert_act --device host_device with the default --host-reads failed (rc ${rc}):\n${out}\n${err}")
endif()

# iso_flop.csv: the adaptive model, its weights at depths 1..6 (the preset's N_max), and a model
# trained with --policy fixed --max-iters 2
execute_process(COMMAND "${EXE}" ${common} --policy fixed --max-iters 2 --out "${WORK}/fixed2" OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "albert_act --policy fixed failed (rc ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${EXE}" ${common} --fixed-checkpoint "${WORK}/fixed2/checkpoint.safetensors" --out "${WORK}/iso"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(STRINGS "${WORK}/iso/iso_flop.csv" iso)
list(LENGTH iso rows)
list(GET iso 0 header)
list(GET iso 8 trained)
if(NOT rc EQUAL 0 OR NOT header STREQUAL "model,iterations,flops_per_token,mlm_acc,sop_acc,mlm_loss" OR NOT rows EQUAL 9
   OR NOT trained MATCHES "^trained at fixed depth,2,")
  message(FATAL_ERROR "albert_act --fixed-checkpoint (rc ${rc}): iso_flop.csv\n${iso}\n${out}\n${err}")
endif()
execute_process(COMMAND "${EXE}" ${common} --fixed-checkpoint "${WORK}/act_cpu/checkpoint.safetensors" --out "${WORK}/iso_bad"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "--fixed-checkpoint .*act_cpu/checkpoint.safetensors: expected a checkpoint of albert_act --policy fixed")
  message(FATAL_ERROR "albert_act --fixed-checkpoint <an ACT checkpoint>: expected an error naming it (rc ${rc}):\n${out}\n${err}")
endif()
message(STATUS "albert_act: iso_flop.csv with a fixed-depth checkpoint; an ACT checkpoint refused")
