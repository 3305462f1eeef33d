# ctest -P script: the whole albert_probe program on a tiny corpus (tests/fixtures/probe_tiny):
# albert_act makes a checkpoint in a few steps, albert_probe probes and fine-tunes it on every
# task, and every output file exists with its header and a row per task.
#   cmake -DACT=<albert_act> -DPROBE=<albert_probe> -DDATA=<tests/fixtures/probe_tiny> -DWORK=<dir> -P albert_probe_run.cmake
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND "${ACT}" --data "${DATA}" --steps 4 --batch 8 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --max-iters 3
                        --log-every 2 --eval-every 4 --dev-batches 1 --save-every 4 --out "${WORK}/act"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "albert_act failed (rc ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${PROBE}" --checkpoint "${WORK}/act/checkpoint.safetensors" --data "${DATA}" --tasks all --mode both --epochs 1
                        --probe-epochs 2 --batch 16 --tau 5e-4,0 --out "${WORK}/probe"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "albert_probe failed (rc ${rc}):\n${out}\n${err}")
endif()
set(expect probing.csv "task,representation,iteration,accuracy,accuracy_std,seeds" finetune.csv "task,policy,tau,accuracy,mean_iterations,accuracy_std,seeds"
           iterations_by_word.csv "task,word_class,tokens,mean_iterations")
list(LENGTH expect n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET expect ${i} f)
  list(GET expect ${j} header)
  file(READ "${WORK}/probe/${f}" text)
  if(NOT text MATCHES "^${header}\n")
    message(FATAL_ERROR "albert_probe: ${f} does not start with '${header}':\n${text}")
  endif()
  foreach(task SentLen WC BShift Tense SubjNum ObjNum CoordInv Genre)
    if(NOT text MATCHES "\n${task},")
      message(FATAL_ERROR "albert_probe: ${f} has no row for ${task}:\n${text}\n--- program output:\n${out}")
    endif()
  endforeach()
endforeach()
file(READ "${WORK}/probe/finetune.csv" text)
foreach(row "SubjNum,act,5e-04," "SubjNum,act,0," "SubjNum,fixed,0,")
  if(NOT text MATCHES "\n${row}")
    message(FATAL_ERROR "albert_probe: finetune.csv has no row '${row}...':\n${text}")
  endif()
endforeach()
file(READ "${WORK}/probe/report.html" html)
if(NOT html MATCHES "Frozen probing per iteration" OR NOT html MATCHES "Iterations by word class")
  message(FATAL_ERROR "albert_probe: report.html lacks its sections")
endif()
# one seed: a standard deviation of 0; --seeds 2: the mean of two runs, a standard deviation, the count
file(READ "${WORK}/probe/probing.csv" text)
if(NOT text MATCHES "\nSubjNum,cls,1,[0-9.]+,0,1\n")
  message(FATAL_ERROR "albert_probe: probing.csv's one-seed rows lack 'accuracy_std 0, seeds 1':\n${text}")
endif()
execute_process(COMMAND "${PROBE}" --checkpoint "${WORK}/act/checkpoint.safetensors" --data "${DATA}" --tasks SubjNum --mode both --epochs 1
                        --probe-epochs 2 --batch 16 --tau 0 --seeds 2 --out "${WORK}/seeds"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "over 2 seeds")
  message(FATAL_ERROR "albert_probe --seeds 2 failed or did not say so (rc ${rc}):\n${out}\n${err}")
endif()
file(READ "${WORK}/seeds/probing.csv" text)
if(NOT text MATCHES "\nSubjNum,mean,3,[0-9.]+,[0-9.e+-]+,2\n")
  message(FATAL_ERROR "albert_probe --seeds 2: probing.csv has no two-seed row for SubjNum:\n${text}")
endif()
file(READ "${WORK}/seeds/finetune.csv" text)
if(NOT text MATCHES "\nSubjNum,act,0,[0-9.]+,[0-9.]+,[0-9.e+-]+,2\n" OR NOT text MATCHES "\nSubjNum,fixed,0,[0-9.]+,[0-9.]+,[0-9.e+-]+,2\n")
  message(FATAL_ERROR "albert_probe --seeds 2: finetune.csv lacks the two-seed rows:\n${text}")
endif()
# a bad flag and a missing checkpoint: one clear line, no crash
execute_process(COMMAND "${PROBE}" --checkpoint "${WORK}/missing.safetensors" --data "${DATA}" --out "${WORK}/bad"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "missing.safetensors")
  message(FATAL_ERROR "albert_probe with a missing checkpoint: rc ${rc}, stderr '${err}'")
endif()
execute_process(COMMAND "${PROBE}" --tasks Nonsense --checkpoint "${WORK}/act/checkpoint.safetensors" --data "${DATA}" --out "${WORK}/bad"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "Nonsense")
  message(FATAL_ERROR "albert_probe --tasks Nonsense: rc ${rc}, stderr '${err}'")
endif()
message(STATUS "albert_probe: probing, fine-tuning and the report ran on every task")
