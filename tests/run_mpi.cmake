# Runs COMMAND (a list), and passes when it ended, within MAX_SECONDS, with a non-zero status
# and output holding every regular expression of EXPECT (a list, separated by |, each matched
# on its own). Used for the failures a process group must turn into an error, not a hang.
string(REPLACE "|" ";" patterns "${EXPECT}")
string(TIMESTAMP start "%s")
execute_process(COMMAND ${COMMAND} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
  TIMEOUT ${MAX_SECONDS})
string(TIMESTAMP stop "%s")
math(EXPR seconds "${stop} - ${start}")
set(all "${out}${err}")
message("${all}")
message("-- exit status ${rc} after ${seconds} s")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the command succeeded; it should have failed")
endif()
if(rc MATCHES "timeout|Process terminated")
  message(FATAL_ERROR "the command hung: still running after ${MAX_SECONDS} s")
endif()
foreach(p ${patterns})
  if(NOT all MATCHES "${p}")
    message(FATAL_ERROR "the output lacks: ${p}")
  endif()
endforeach()
