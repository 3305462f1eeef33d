# run_ok(<what> <command...>): runs the command; a non-zero exit stops the ctest -P script with
# <what>, the exit code and both outputs. Sets `out` (stdout) in the caller. Included by the
# scripts that run the example programs (example_config.cmake, lm_layers_run.cmake).
function(run_ok what)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (rc ${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
