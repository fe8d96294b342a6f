#!/usr/bin/env bash
# Installs what is missing, builds, and starts attnscope. Arguments pass through, e.g.
#   scripts/run.sh                      the window with the default preset
#   scripts/run.sh compute s.json       the command line
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
attnscope_setup
exec "$ATTNSCOPE_BIN" "$@"
