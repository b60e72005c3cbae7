# cmake -P script: install the built Fathom to WORK_DIR/prefix, build the consumer project
# against it with find_package(Fathom), and run it.
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step description)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer test: ${description} failed (${result})\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install" ${CMAKE_COMMAND} --install ${FATHOM_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run_step("configure" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
         -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run_step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("run" ${WORK_DIR}/build/consumer)
message("${step_output}")

# The installed programs start (each finds libfathom through its rpath) and print their help.
foreach(program fathom-train fathom-generate fathom-config fathom-export fathom-estimate-memory fathom-report)
  run_step("installed ${program}" ${WORK_DIR}/prefix/bin/${program} --help)
endforeach()
