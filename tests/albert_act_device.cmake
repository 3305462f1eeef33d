# ctest -P script: albert_act --device host_device (the CPU kernels behind a device interface:
# no element access, uploads and downloads explicit) must write the same checkpoint, bit for
# bit, and the same halting table as --device cpu, for ACT (compact path) and PonderNet.
#   cmake -DEXE=<albert_act> -DDATA=<tests/fixtures/albert_tiny> -DWORK=<dir> -P albert_act_device.cmake
file(REMOVE_RECURSE "${WORK}")
set(common --data "${DATA}" --steps 8 --batch 8 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --log-every 4
           --eval-every 4 --dev-batches 2 --save-every 8)
foreach(policy act pondernet)
  foreach(device cpu host_device)
    execute_process(COMMAND "${EXE}" ${common} --policy ${policy} --device ${device} --out "${WORK}/${policy}_${device}"
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0 OR NOT out MATCHES "device ${device}")
      message(FATAL_ERROR "albert_act --policy ${policy} --device ${device} failed (rc ${rc}):\n${out}\n${err}")
    endif()
  endforeach()
  foreach(f checkpoint.safetensors halting.csv fixed_point.csv)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/${policy}_cpu/${f}" "${WORK}/${policy}_host_device/${f}"
                    RESULT_VARIABLE differ)
    if(NOT differ EQUAL 0)
      message(FATAL_ERROR "albert_act --policy ${policy}: ${f} differs between --device cpu and --device host_device")
    endif()
  endforeach()
endforeach()
message(STATUS "albert_act: cpu and host_device agree bit for bit (act, pondernet)")
