# cmake -P script: concatenates the corpus files (FILES, ';'-separated) into OUTPUT, each
# preceded by a header line naming it.
file(WRITE ${OUTPUT} "")
foreach(path IN LISTS FILES)
  file(READ ${path} text)
  file(RELATIVE_PATH name ${SOURCE_DIR} ${path})
  file(APPEND ${OUTPUT} "\n===== ${name} =====\n${text}")
endforeach()
