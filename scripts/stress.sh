#!/usr/bin/env bash
# The process and integration tests N times in a row (default 5), with two busy-looping CPU hogs
# beside them the whole time: a timing test that fails only on a loaded machine fails here.
# Needs build-test/ (scripts/test.sh builds it). Prints each run's result and the failed cases,
# then a summary; exits 1 if any run failed.
# Usage: scripts/stress.sh [N] [ctest args...]     (e.g. scripts/stress.sh 2 -R 'exec|pools')
set -euo pipefail
cd "$(dirname "$0")/../build-test"
runs="${1:-5}"
(( $# > 0 )) && shift

hogs=()
stop_hogs() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_hogs EXIT
for _ in 1 2; do
  bash -c 'while :; do :; done' &
  hogs+=("$!")
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed_runs=0
declare -A failures=()
for run in $(seq 1 "$runs"); do
  log="stress-run-$run.log"
  start=$(date +%s)
  if ctest -L 'process|integration' -j2 --timeout 600 --output-on-failure "$@" >"$log" 2>&1; then
    result="passed"
  else
    result="FAILED"
    failed_runs=$((failed_runs + 1))
  fi
  summary=$(grep -E 'tests passed, [0-9]+ tests failed' "$log" || echo "no summary (see $log)")
  echo "run $run/$runs: $result in $(( $(date +%s) - start )) s: $summary"
  while read -r name; do
    [[ -z $name ]] && continue
    echo "  failed: $name"
    failures["$name"]=$(( ${failures["$name"]:-0} + 1 ))
  done < <(sed -n '/The following tests FAILED:/,$p' "$log" | grep -E '^[[:space:]]+[0-9]+ - ' |
           sed -E 's/^[[:space:]]*[0-9]+ - //')
done
echo
echo "$runs runs beside two CPU hogs: $failed_runs failed"
for name in "${!failures[@]}"; do
  echo "  ${failures[$name]}x $name"
done
(( failed_runs == 0 ))
