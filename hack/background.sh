#!/usr/bin/env bash
# Run a long build in the background at the lowest CPU and I/O priority,
# so that it takes only the time the foreground leaves idle, and stop it
# when the make that started it exits first (a failed step included).
#
# Usage: hack/background.sh OWNER_PID LOG -- COMMAND [ARG...]
#   OWNER_PID: the process whose exit ends the command (make: $$PPID in a
#   recipe). COMMAND's output goes to LOG. Returns at once.
#
# `make test` starts the real cluster's binaries this way (~12 min of CPU
# on a cold machine) before its unit tests, which spend much of their time
# waiting on simulated blocks; hack/envtest/build.sh's lock makes the later
# foreground build wait for this one instead of starting its own.
set -euo pipefail

if (($# < 4)) || [[ $3 != -- ]]; then
	echo "usage: $0 OWNER_PID LOG -- COMMAND [ARG...]" >&2
	exit 2
fi
owner=$1
log=$2
shift 3
mkdir -p "$(dirname "${log}")"

(
	# setsid: the command leads a process group of its own, so that the
	# whole tree (go build and its compilers) can be stopped at once.
	setsid nice -n 19 ionice -c 3 "$@" >"${log}" 2>&1 </dev/null &
	child=$!
	while kill -0 "${child}" 2>/dev/null; do
		if ! kill -0 "${owner}" 2>/dev/null; then
			echo "background.sh: $$ owner ${owner} exited; stopping $*" >>"${log}"
			kill -TERM -- "-${child}" 2>/dev/null || true
			break
		fi
		sleep 2
	done
) </dev/null >/dev/null 2>&1 &
echo "background: $* (log: ${log})"
