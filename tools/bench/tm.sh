#!/usr/bin/env bash
# tm.sh PREFIX CMD...: run CMD under GNU time; write "wall user sys maxrss_kb"
# (its last line) to PREFIX.time and the end time (epoch seconds) to PREFIX.end.
# The exit status is CMD's.
set -uo pipefail
out=$1
shift
/usr/bin/time -f '%e %U %S %M' -o "$out.time" "$@"
rc=$?
printf '%s\n' "$EPOCHREALTIME" >"$out.end"
exit $rc
