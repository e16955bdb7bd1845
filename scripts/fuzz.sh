#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang, ASan and UBSan into build-fuzz/, writes
# the seed corpus, and runs each target for SECONDS (default 300), one after the other.
# Prints executions, coverage (cov: edges, ft: features) and crashes per target; crash inputs go
# to build-fuzz/artifacts/. Exit status 1 if any target crashed.
# Usage: scripts/fuzz.sh [SECONDS]      e.g. scripts/fuzz.sh 10 (a quick check, as in test.sh)
#        scripts/fuzz.sh --build-only   the build alone (test.sh runs it beside its tests)
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
[[ "${1:-}" == --build-only ]] && { build_only=1; shift; }
seconds="${1:-300}"
targets=(fuzz_record_guard fuzz_request_adapter fuzz_app_parsers)
build=build-fuzz

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFCGI_HOST_SANITIZE=ON -DFCGI_HOST_TESTS=OFF \
      -DFCGI_HOST_FUZZ=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" fuzz_gen_corpus
(( build_only )) && exit 0

# The committed seeds are generated, not hand-made: regenerate them (same bytes unless the
# generator changed), then let each target grow its own working corpus from them.
"$build/tests/fuzz/fuzz_gen_corpus" tests/fuzz/corpus
mkdir -p "$build/artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

status=0
summary=()
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  mkdir -p "$work"
  log="$build/$t.log"
  echo "== $t: ${seconds}s"
  set +e
  "$build/tests/fuzz/$t" "$work" tests/fuzz/corpus -max_total_time="$seconds" -max_len=70000 \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$t-" >"$log" 2>&1
  rc=$?
  set -e
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
  crashes=$(grep -cE '^==[0-9]+==ERROR|invariant broken|^SUMMARY: (Address|Undefined)|deadly signal' "$log" || true)
  echo "   last status: ${last:-none}"
  echo "   executions:  ${execs:-?}   exit: $rc   crash reports: $crashes"
  ls "$build/artifacts" | grep "^$t-" | sed 's/^/   artifact: /' || true
  (( rc == 0 )) || { status=1; tail -40 "$log"; }
  summary+=("$t: execs=${execs:-?} cov:${last#*cov:} rc=$rc")
done
echo "== summary"
printf '   %s\n' "${summary[@]}"
exit "$status"
