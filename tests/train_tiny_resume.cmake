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
