# ctest -P script: a bad value of a flag stops an example at once, with exit code 2 and one
# line naming the flag, before any data is read or any step is trained: values that are no
# number, out of range, NaN or infinite (CLI11's range and sign checks let NaN through, so
# examples/common/cli.hpp checks every floating-point value for finiteness).
#   cmake -DEXE=<albert_act> -DDATA=<tests/fixtures/albert_tiny> -DWORK=<dir> -P example_flags.cmake
file(REMOVE_RECURSE "${WORK}")
set(common --data "${DATA}" --steps 2 --batch 4 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --eval-every 0 --dev-batches 1)
foreach(bad "lr;nan" "lr;-inf" "sop-weight;inf" "sop-weight;NaN" "mask-prob;nan" "halting-bias;nan" "max-minutes;infinity"
            "weight-decay;2" "lr;fast" "steps;1.5")
  list(GET bad 0 flag)
  list(GET bad 1 value)
  execute_process(COMMAND "${EXE}" ${common} --${flag} ${value} --out "${WORK}/${flag}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "--${flag}" OR out MATCHES "step ")
    message(FATAL_ERROR "albert_act --${flag} ${value}: expected exit code 2 and an error naming --${flag} before training, got rc ${rc}:\n${out}\n${err}")
  endif()
  if(EXISTS "${WORK}/${flag}")
    message(FATAL_ERROR "albert_act --${flag} ${value}: wrote ${WORK}/${flag} although its flags were rejected")
  endif()
endforeach()
# the boundary: a finite value in range still runs
execute_process(COMMAND "${EXE}" ${common} --sop-weight 0.5 --lr 1e-3 --out "${WORK}/ok"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "MLM \\+ 0.50 x SOP")
  message(FATAL_ERROR "albert_act --sop-weight 0.5 failed or did not print its loss weights (rc ${rc}):\n${out}\n${err}")
endif()
message(STATUS "albert_act: bad flag values stop it with exit code 2 and the flag's name")
