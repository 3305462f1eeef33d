# ctest -P script: a run of train_tiny interrupted and resumed must end exactly where an
# uninterrupted run ends (same final evaluation loss, printed with 9 significant digits).
#   cmake -DEXE=<train_tiny> -DWORK=<dir> -P train_tiny_resume.cmake
file(REMOVE_RECURSE "${WORK}")
set(common --steps 60 --log-every 30 --save-every 20 --dim 32 --ff 64 --layers 1)
execute_process(COMMAND "${EXE}" ${common} --out "${WORK}/straight" OUTPUT_VARIABLE straight RESULT_VARIABLE rc1)
execute_process(COMMAND "${EXE}" --steps 30 --log-every 30 --save-every 20 --dim 32 --ff 64 --layers 1 --out "${WORK}/resumed"
                RESULT_VARIABLE rc2)
execute_process(COMMAND "${EXE}" ${common} --out "${WORK}/resumed" --resume OUTPUT_VARIABLE resumed RESULT_VARIABLE rc3)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR NOT rc3 EQUAL 0)
  message(FATAL_ERROR "train_tiny failed: ${rc1} ${rc2} ${rc3}\n${straight}\n${resumed}")
endif()
string(REGEX MATCH "final eval loss [^\n]*" a "${straight}")
string(REGEX MATCH "final eval loss [^\n]*" b "${resumed}")
if(NOT a OR NOT a STREQUAL b)
  message(FATAL_ERROR "resumed run differs: '${a}' vs '${b}'\n--- straight\n${straight}\n--- resumed\n${resumed}")
endif()
if(NOT resumed MATCHES "resumed from")
  message(FATAL_ERROR "the second run did not resume:\n${resumed}")
endif()
message(STATUS "straight and resumed runs agree: ${a}")

# A killed run leaves records after its last checkpoint in metrics.jsonl (here a record of
# step 45 and a torn line) and a temporary checkpoint; resuming must drop both.
file(WRITE "${WORK}/killed/metrics.jsonl" "")
execute_process(COMMAND "${EXE}" --steps 30 --log-every 10 --save-every 20 --dim 32 --ff 64 --layers 1 --out "${WORK}/killed"
                RESULT_VARIABLE rc4)
file(APPEND "${WORK}/killed/metrics.jsonl" "{\"step\": 45, \"loss\": 1}\n{\"step\": 5")
file(WRITE "${WORK}/killed/checkpoint.safetensors.tmp.999999.0" "half a checkpoint")
execute_process(COMMAND "${EXE}" --steps 40 --log-every 10 --save-every 20 --dim 32 --ff 64 --layers 1 --out "${WORK}/killed" --resume
                RESULT_VARIABLE rc5)
file(STRINGS "${WORK}/killed/metrics.jsonl" records)
set(steps "")
foreach(r IN LISTS records)
  string(REGEX MATCH "\"step\": ?([0-9]+)" s "${r}")
  list(APPEND steps "${CMAKE_MATCH_1}")
endforeach()
string(REPLACE ";" ", " steps "${steps}")
if(NOT rc4 EQUAL 0 OR NOT rc5 EQUAL 0 OR NOT steps STREQUAL "10, 20, 30, 40")
  message(FATAL_ERROR "after --resume metrics.jsonl holds steps [${steps}] (rc ${rc4} ${rc5}); want 10, 20, 30, 40 once each")
endif()
if(EXISTS "${WORK}/killed/checkpoint.safetensors.tmp.999999.0")
  message(FATAL_ERROR "the killed run's temporary checkpoint is still there after the next save")
endif()

# A diverging run must stop with an error and keep the last good (finite) checkpoint: first
# with the divergence guard off, so that the NaN guard meets it (Adam's second moments
# overflow to inf within a few steps), then with the guard, which stops it at the first step.
execute_process(COMMAND "${EXE}" --steps 200 --lr 1e6 --clip 0 --save-every 1 --log-every 100 --dim 32 --ff 64 --layers 1
                        --out "${WORK}/guarded"
                OUTPUT_VARIABLE out5 ERROR_VARIABLE err5 RESULT_VARIABLE rc5)
if(rc5 EQUAL 0 OR NOT err5 MATCHES "step 1: diverged: the parameters' root mean square")
  message(FATAL_ERROR "a run with --lr 1e6 was not stopped by the divergence guard (rc ${rc5}):\n${out5}\n${err5}")
endif()
execute_process(COMMAND "${EXE}" --steps 200 --lr 1e6 --clip 0 --save-every 1 --log-every 100 --dim 32 --ff 64 --layers 1
                        --no-divergence-guard --out "${WORK}/diverged"
                OUTPUT_VARIABLE out6 ERROR_VARIABLE err6 RESULT_VARIABLE rc6)
if(rc6 EQUAL 0 OR NOT err6 MATCHES "non-finite")
  message(FATAL_ERROR "a run with --lr 1e6 did not stop on non-finite values (rc ${rc6}):\n${out6}\n${err6}")
endif()
execute_process(COMMAND "${EXE}" --steps 5 --dim 32 --ff 64 --layers 1 --no-divergence-guard --out "${WORK}/diverged" --resume
                OUTPUT_VARIABLE out7 ERROR_VARIABLE err7 RESULT_VARIABLE rc7)
if(NOT rc7 EQUAL 0 OR NOT out7 MATCHES "final eval loss")
  message(FATAL_ERROR "the checkpoint left by the diverged run does not load (rc ${rc7}):\n${out7}\n${err7}")
endif()
message(STATUS "resume drops a killed run's extra records and temporaries; a diverged run keeps its last good checkpoint")

# --device: the run on host_device (the CPU kernels behind a device interface) equals the CPU
# run bit for bit, and a checkpoint written on one device resumes on the other.
execute_process(COMMAND "${EXE}" ${common} --out "${WORK}/on_device" --device host_device OUTPUT_VARIABLE on_device RESULT_VARIABLE rc_dev6)
execute_process(COMMAND "${EXE}" --steps 30 --log-every 30 --save-every 20 --dim 32 --ff 64 --layers 1 --out "${WORK}/crossed"
                --device host_device RESULT_VARIABLE rc_dev7)
execute_process(COMMAND "${EXE}" ${common} --out "${WORK}/crossed" --resume --device cpu OUTPUT_VARIABLE crossed RESULT_VARIABLE rc_dev8)
execute_process(COMMAND "${EXE}" --device tpu OUTPUT_QUIET ERROR_VARIABLE bad_device RESULT_VARIABLE rc_dev9)
string(REGEX MATCH "final eval loss [^\n]*" c "${on_device}")
string(REGEX MATCH "final eval loss [^\n]*" d "${crossed}")
if(NOT rc_dev6 EQUAL 0 OR NOT rc_dev7 EQUAL 0 OR NOT rc_dev8 EQUAL 0 OR NOT c STREQUAL a OR NOT d STREQUAL a)
  message(FATAL_ERROR "--device host_device: '${c}', resumed across devices: '${d}', cpu: '${a}' (rc ${rc_dev6} ${rc_dev7} ${rc_dev8})")
endif()
if(NOT rc_dev9 EQUAL 2 OR NOT bad_device MATCHES "--device: tpu not in {cpu,cuda,host_device}")
  message(FATAL_ERROR "--device tpu: rc ${rc_dev9}, '${bad_device}'")
endif()
message(STATUS "host_device and cross-device resume agree with the CPU: ${a}")
