# cmake -DEXE=<chapter executable> -DOUT=<base path> -P run_chapter.cmake
#
# The CTest test chNN_topic.run (tests/CMakeLists.txt): runs a chapter's program once and writes
# its stdout and stderr, interleaved, to <base>.txt and its exit status to <base>.status, which
# every golden test of that chapter then reads (tests/golden.h) instead of running the program
# again. This test passes whatever the chapter does: a chapter that fails is reported by those
# tests, with its output.
if(NOT EXE OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DEXE=<executable> -DOUT=<base path> -P run_chapter.cmake")
endif()
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
# No status file while the program runs: a run cut short (a timeout) leaves none, and the tests
# then run the program themselves rather than read a half-written output.
file(REMOVE "${OUT}.status" "${OUT}.txt")
string(TIMESTAMP start "%s")
execute_process(COMMAND "${EXE}" OUTPUT_FILE "${OUT}.txt" ERROR_FILE "${OUT}.txt"
                RESULT_VARIABLE rc)
string(TIMESTAMP stop "%s")
math(EXPR seconds "${stop} - ${start}")
if(rc MATCHES "^-?[0-9]+$")
  message("${EXE} exited with status ${rc} after about ${seconds} s; its output is in ${OUT}.txt")
else()
  # Killed by a signal, or not started: CMake gives a sentence instead of a number.
  message("${EXE}: ${rc}, after about ${seconds} s; its output is in ${OUT}.txt")
  file(APPEND "${OUT}.txt" "\n(run_chapter.cmake: ${rc})\n")
  # The status is then -1, and CMake's words follow it on a second line for the tests to quote.
  set(rc "-1\n${rc}")
endif()
file(WRITE "${OUT}.status" "${rc}\n")
