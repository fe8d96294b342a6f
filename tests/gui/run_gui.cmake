# Runs the window once under the xvfb-run given in XVFB (a ";"-list travelling as "^^"), then checks the exit
# code and, optionally, that stderr matches a regular expression (STYLE 7c).
# -DXVFB=... -DEXE=... -DARGS=... -DEXPECT_RC=N [-DSTDERR_REGEX=...] -DWORKDIR=...
string(REPLACE "^^" ";" args "${ARGS}")
string(REPLACE "^^" ";" xvfb "${XVFB}")
execute_process(COMMAND ${xvfb} ${EXE} ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                WORKING_DIRECTORY ${WORKDIR} TIMEOUT 120)
if(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED STDERR_REGEX AND NOT err MATCHES "${STDERR_REGEX}")
  message(FATAL_ERROR "stderr does not match '${STDERR_REGEX}':\n${err}")
endif()
message(STATUS "stderr:\n${err}")
