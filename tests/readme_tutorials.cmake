# ctest -P script: docs/tutorials.md shows every docs/tutorial/*.cpp exactly (the file's text
# inside a ```cpp block). A tutorial changed without the page, or the reverse, fails here; the
# page's code blocks are regenerated from the files with scripts/sync-readme-tutorials.
#   cmake -DREADME=<docs/tutorials.md> -DDIR=<docs/tutorial> -P readme_tutorials.cmake
file(READ "${README}" readme)
file(GLOB files "${DIR}/*.cpp")
set(missing "")
foreach(f ${files})
  file(READ "${f}" body)
  string(FIND "${readme}" "```cpp\n${body}```" at)
  if(at EQUAL -1)
    get_filename_component(n "${f}" NAME)
    string(APPEND missing " ${n}")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "${README} does not show these tutorials as they are:${missing} (run scripts/sync-readme-tutorials)")
endif()
list(LENGTH files n)
if(n EQUAL 0)
  message(FATAL_ERROR "no tutorials in ${DIR}")
endif()
message(STATUS "${README} shows all ${n} tutorials as they are")
