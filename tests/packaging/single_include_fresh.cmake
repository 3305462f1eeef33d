# cmake -DPython3_EXECUTABLE=... -DSOURCE_DIR=<depthlab src> -DOUTPUT=<tmp file> -P single_include_fresh.cmake
# Regenerates the single header into OUTPUT and compares it with the committed one.
set(committed "${SOURCE_DIR}/single_include/depthlab/depthlab.hpp")
file(REMOVE "${OUTPUT}")
execute_process(
  COMMAND "${Python3_EXECUTABLE}" "${SOURCE_DIR}/scripts/amalgamate" "${OUTPUT}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "scripts/amalgamate failed (${rc})")
endif()
if(NOT EXISTS "${committed}")
  message(FATAL_ERROR "single_include is stale: run scripts/amalgamate (${committed} is missing)")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E compare_files "${OUTPUT}" "${committed}"
  RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "single_include is stale: run scripts/amalgamate")
endif()
message(STATUS "single_include/depthlab/depthlab.hpp is up to date")
