#!/usr/bin/env bash
# The suite's own shell scripts, against a flaw that fails a run now and
# then: under `set -o pipefail`, a reader that stops early (grep -q, head)
# leaves the writer before it a SIGPIPE when it writes again, and the
# pipeline fails although the line was found.  `ldd X | grep -q libasan`
# missed 2 times in 500 and failed a CI run.  Read the whole input instead:
# `grep >/dev/null PATTERN`, `sed -n 1p`.
#
# usage: test_scripts.sh SOURCE_ROOT
set -euo pipefail

root=${1:?usage: test_scripts.sh SOURCE_ROOT}
cd "$root"

mapfile -t scripts < <( { find tests tools -name '*.sh' -type f; [[ -f .ci/run ]] && echo .ci/run; } | sort)
[[ ${#scripts[@]} -gt 10 ]] || { echo "FAIL: only ${#scripts[@]} scripts found under $root" >&2; exit 1; }

bad=0 checked=0
for f in "${scripts[@]}"; do
	grep >/dev/null -E '^[[:space:]]*set -[a-z]*o pipefail|set -o pipefail' "$f" || continue
	checked=$((checked + 1))
	# A grep that exits at its first match: its status is always used.
	# An assignment from a pipeline ending in head: set -e ends the
	# script when the writer before head is killed.
	while IFS= read -r hit; do
		echo "FAIL: $f:$hit" >&2
		bad=$((bad + 1))
	done < <(grep -nE '\|[[:space:]]*grep[[:space:]]+(-[a-zA-Z]*[qm][a-zA-Z0-9]*|--quiet|--max-count)|^[[:space:]]*(local[[:space:]]+)?[A-Za-z_][A-Za-z_0-9]*=\$\([^#]*\|[[:space:]]*head\b' "$f" |
		grep -vE '^[0-9]+:[[:space:]]*#|pipefail-ok' || true)
done
[[ $checked -gt 10 ]] || { echo "FAIL: only $checked scripts set pipefail: the pattern for it is wrong" >&2; exit 1; }
if [[ $bad -gt 0 ]]; then
	echo "FAIL: $bad pipelines an early-exiting reader can fail under pipefail (see the comment at the top of $0)" >&2
	exit 1
fi
echo "ok: $checked scripts with pipefail, no early-exiting reader in a pipeline whose status counts"
