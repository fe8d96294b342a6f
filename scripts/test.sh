#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (GUI tests under Xvfb, started by the tests).
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit   or   scripts/test.sh -R golden
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
attnscope_setup
cd "$ATTNSCOPE_BUILD"
status=0
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@" || status=$?

# The Python package (python/, docs/bundle.md): installed into the build venv (offline: --no-build-isolation uses
# the venv's setuptools and wheel) and tested with pytest; the tests marked needs_program run the program built
# above through ATTNSCOPE_BIN (skipped when the app is not built).
py="$ATTNSCOPE_BUILD/venv/bin/python3"
attnscope_log "installing python/ into $ATTNSCOPE_BUILD/venv and running its tests"
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps "$ATTNSCOPE_ROOT/python" || status=1
if [ -x "$ATTNSCOPE_BIN" ]; then export ATTNSCOPE_BIN; else unset ATTNSCOPE_BIN; fi
"$py" -m pytest -q -p no:cacheprovider "$ATTNSCOPE_ROOT/python/tests" || status=1
exit $status
