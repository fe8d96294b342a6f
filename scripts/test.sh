#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (GUI tests under Xvfb, started by the tests).
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit   or   scripts/test.sh -R golden
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
attnscope_setup
cd "$ATTNSCOPE_BUILD"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
