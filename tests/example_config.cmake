# ctest -P script: reproducible runs through configs (examples/common/cli.hpp).
# * Round trip: a run writes OUT/config.toml before training; `--config that --out other`
#   repeats it to the bit (the same checkpoint bytes, the same config but for --out).
# * Override: a flag on the command line wins over the file.
# * Bad configs: an unknown key, a value of the wrong type, out of range or not finite, and a
#   missing file each stop the program with exit code 2 and one line naming the key (or the
#   file), before anything is written.
# * The other training example (train_tiny) writes a config that repeats its run too, and a
#   list option (component_value --rewind-k) and a flag set to true round-trip through TOML.
#   cmake -DEXE=<albert_act> -DTINY=<train_tiny> [-DCV=<component_value>] -DDATA=<tests/fixtures/albert_tiny> -DWORK=<dir> -P example_config.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(common --data "${DATA}" --steps 3 --batch 4 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --eval-every 0
           --dev-batches 1 --log-every 1 --lr 0.00123456789 --mask-prob 0.2 --policy act_graves)

include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
function(expect_same_checkpoint a b what)
  file(SHA256 "${a}/checkpoint.safetensors" ha)
  file(SHA256 "${b}/checkpoint.safetensors" hb)
  if(NOT ha STREQUAL hb)
    message(FATAL_ERROR "${what}: the run repeated from ${a}/config.toml ended with other bits than the original")
  endif()
endfunction()

# The configs two runs saved are the same but for their --out lines.
function(expect_same_config a b what)
  file(READ "${a}/config.toml" a_config)
  file(READ "${b}/config.toml" b_config)
  string(REPLACE "${a}" "OUT" a_norm "${a_config}")
  string(REPLACE "${b}" "OUT" b_norm "${b_config}")
  if(NOT a_norm STREQUAL b_norm)
    message(FATAL_ERROR "${what}:\n${a_config}\n---\n${b_config}")
  endif()
endfunction()

# ---- round trip
run_ok("albert_act (original)" "${EXE}" ${common} --out "${WORK}/x")
if(NOT EXISTS "${WORK}/x/config.toml")
  message(FATAL_ERROR "albert_act wrote no ${WORK}/x/config.toml")
endif()
file(READ "${WORK}/x/config.toml" x_config)
foreach(line "lr = 0.00123456789" "mask-prob = 0.2" "policy = \"act_graves\"" "steps = 3")
  string(FIND "${x_config}" "\n${line}\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "config.toml lacks the line '${line}':\n${x_config}")
  endif()
endforeach()
run_ok("albert_act --config" "${EXE}" --config "${WORK}/x/config.toml" --out "${WORK}/y")
expect_same_checkpoint("${WORK}/x" "${WORK}/y" "albert_act")
expect_same_config("${WORK}/x" "${WORK}/y" "the repeated run resolved other options")

# ---- override
run_ok("albert_act --config --steps 2" "${EXE}" --config "${WORK}/x/config.toml" --steps 2 --out "${WORK}/z")
if(NOT out MATCHES "step 2/2" OR out MATCHES "step 3/")
  message(FATAL_ERROR "--steps 2 on the command line did not override the config's steps = 3:\n${out}")
endif()
file(READ "${WORK}/z/config.toml" z_config)
if(NOT z_config MATCHES "\nsteps = 2\n" OR NOT z_config MATCHES "\nmask-prob = 0.2\n")
  message(FATAL_ERROR "z/config.toml should hold the override and the file's other values:\n${z_config}")
endif()

# ---- bad configs: exit 2, one line naming the key, nothing written. Each file is the good
# config with the line under test in place of that key's own (every other key stays, so the
# run would train if the bad line were accepted); the files are numbered, so that a message
# naming the file cannot pass for one naming the key.
set(n 0)
foreach(bad "lrx = 0.1|unknown key 'lrx'" "lr = \"fast\"|--lr:" "lr = nan|--lr:" "mask-prob = 2.0|--mask-prob:" "steps = 1.5|--steps:"
            "policy = \"halt\"|--policy:" "max-minutes = inf|--max-minutes:")
  math(EXPR n "${n} + 1")
  string(REPLACE "|" ";" parts "${bad}")
  list(GET parts 0 line)
  list(GET parts 1 expected)
  string(REGEX REPLACE " = .*" "" key "${line}")
  string(REGEX REPLACE "\n${key} = [^\n]*\n" "\n" base "${x_config}")
  file(WRITE "${WORK}/bad${n}.toml" "${base}\n${line}\n")
  execute_process(COMMAND "${EXE}" --config "${WORK}/bad${n}.toml" --out "${WORK}/bad${n}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  string(FIND "${err}" "${expected}" at)
  if(NOT rc EQUAL 2 OR at EQUAL -1 OR NOT lines EQUAL 1 OR out MATCHES "step ")
    message(FATAL_ERROR "config line '${line}': expected exit code 2 and one line with \"${expected}\", got rc ${rc}:\n${out}\n${err}")
  endif()
  if(EXISTS "${WORK}/bad${n}")
    message(FATAL_ERROR "config line '${line}': wrote ${WORK}/bad${n} although the config was rejected")
  endif()
endforeach()
# the control: the same file with a good value trains (so the cases above fail for their line)
string(REGEX REPLACE "\nlr = [^\n]*\n" "\n" base "${x_config}")
file(WRITE "${WORK}/good.toml" "${base}\nlr = 0.002\n")
run_ok("albert_act --config good.toml" "${EXE}" --config "${WORK}/good.toml" --out "${WORK}/good")
if(NOT out MATCHES "step 3/3")
  message(FATAL_ERROR "the control config did not train:\n${out}")
endif()

# ---- component_value (when built): a deprecated name still works, with a warning, and the
# saved config holds the current name; a list and a flag set to true round-trip. (No data
# folder: the run stops at the data with its own error, after writing the config.)
if(CV)
  execute_process(COMMAND "${CV}" --data "${WORK}/no-data" --max-train-minutes 1.5 --rewind-k 0,3 --skip-analyses --out "${WORK}/cv_a"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT err MATCHES "--max-train-minutes is deprecated, use --max-minutes" OR NOT EXISTS "${WORK}/cv_a/config.toml")
    message(FATAL_ERROR "component_value --max-train-minutes: expected a deprecation warning and a saved config (rc ${rc}):\n${err}")
  endif()
  file(READ "${WORK}/cv_a/config.toml" a_config)
  foreach(line "max-minutes = 1.5" "rewind-k = [0, 3]" "skip-analyses = true")
    string(FIND "${a_config}" "\n${line}\n" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "component_value's config.toml lacks '${line}':\n${a_config}")
    endif()
  endforeach()
  if(a_config MATCHES "max-train-minutes")
    message(FATAL_ERROR "the deprecated name reached the saved config:\n${a_config}")
  endif()
  execute_process(COMMAND "${CV}" --config "${WORK}/cv_a/config.toml" --out "${WORK}/cv_b" OUTPUT_QUIET ERROR_QUIET)
  expect_same_config("${WORK}/cv_a" "${WORK}/cv_b" "component_value: a list or a flag did not round-trip")
  execute_process(COMMAND "${CV}" --max-minutes 1 --max-train-minutes 2 --out "${WORK}/cv_both"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 2 OR EXISTS "${WORK}/cv_both")
    message(FATAL_ERROR "--max-minutes with its old name --max-train-minutes: expected exit code 2 (rc ${rc}):\n${err}")
  endif()
endif()

# ---- train_tiny repeats its run from its config too
set(tiny --steps 4 --log-every 2 --save-every 2 --dim 16 --ff 32 --layers 1 --heads 2 --lr 0.003)
run_ok("train_tiny (original)" "${TINY}" ${tiny} --out "${WORK}/tiny_x")
run_ok("train_tiny --config" "${TINY}" --config "${WORK}/tiny_x/config.toml" --out "${WORK}/tiny_y")
expect_same_checkpoint("${WORK}/tiny_x" "${WORK}/tiny_y" "train_tiny")
message(STATUS "configs: the round trip repeats runs to the bit, flags override, bad keys stop with exit code 2")
