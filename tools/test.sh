#!/usr/bin/env bash
# The whole test suite from a clean checkout: install what is missing
# (Debian 12, as root), build with -Werror, run every meson test suite.
#   tools/test.sh            # all suites
#   tools/test.sh unit       # one suite (unit, image)
set -euo pipefail
cd "$(dirname "$0")/.."

tools/deps.sh
build=${BUILD_DIR:-build-test}
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" -Dwerror=true -Dbuildtype=debugoptimized
fi
meson compile -C "$build"
suite_args=()
for s in "$@"; do suite_args+=(--suite "$s"); done
meson test -C "$build" --print-errorlogs --num-processes 2 "${suite_args[@]}"
