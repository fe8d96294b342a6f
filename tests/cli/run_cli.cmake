# Runs the attnscope command line once and checks its exit code and output.
# -DEXE=... -DARGS="a;b;c" -DEXPECT_RC=N [-DSTDERR_REGEX=...] [-DSTDOUT_REGEX=...] [-DWORKDIR=...]
string(REPLACE "^^" ";" args "${ARGS}")
execute_process(COMMAND ${EXE} ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                WORKING_DIRECTORY ${WORKDIR} TIMEOUT 120)
if(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED STDERR_REGEX AND NOT err MATCHES "${STDERR_REGEX}")
  message(FATAL_ERROR "stderr does not match '${STDERR_REGEX}':\n${err}")
endif()
if(DEFINED STDOUT_REGEX AND NOT out MATCHES "${STDOUT_REGEX}")
  message(FATAL_ERROR "stdout does not match '${STDOUT_REGEX}':\n${out}")
endif()
# Bad input must be one line on stderr, not a flood (and never a crash dump).
if(NOT EXPECT_RC STREQUAL "0")
  string(REGEX MATCHALL "\n" lines "${err}")
  list(LENGTH lines n)
  if(n GREATER 2)
    message(FATAL_ERROR "expected a one-line error on stderr, got ${n} lines:\n${err}")
  endif()
endif()
