#!/usr/bin/env bash
# Builds fcgi-host with ASan/UBSan (Debug) into build-test/ and runs every test layer:
# unit, process, integration (the real binary, the raw FastCGI client, a private nginx).
# Installs what is missing first (Debian 12). Ends with the list of the cases that could not run
# here (SKIPPED: a front server or php-cgi missing, no cgroup v2 to write), never counted as
# passed.
# Usage: scripts/test.sh [ctest args...]
#        scripts/test.sh --repeat N [ctest args...]   the process and integration tests N times
#                                                     beside two CPU hogs (scripts/stress.sh)
#        scripts/test.sh --install-only               only what the tests need, installed
#                                                     (scripts/debian-packages.txt)
set -euo pipefail
cd "$(dirname "$0")/.."

repeat=0
install_only=0
if [[ "${1:-}" == --install-only ]]; then
  install_only=1
elif [[ "${1:-}" == --repeat ]]; then
  repeat="${2:?--repeat N}"
  shift 2
fi

# What the build and every stage need: scripts/debian-packages.txt (its groups but the
# package's own, which scripts/package-test.sh installs when it runs).
source scripts/debian-packages.sh
install_missing() {
  install_debian_packages build demo examples tests front-servers containers
  # kubectl for `kubectl kustomize conf/kubernetes`: Debian's, unless one is installed already
  # (a kubectl of another package holds the same path).
  command -v kubectl >/dev/null || install_debian_packages kubectl
}

# Each stage's wall time, printed as it ends, so a slow CI run says where its minutes went.
stage_started=$SECONDS
stage_done() {
  echo "== stage: $1 took $((SECONDS - stage_started)) s (total $SECONDS s)"
  stage_started=$SECONDS
}

install_missing
stage_done "packages"
((install_only)) && exit 0
# A unity build (each target's files compiled eight to a file: half the compile time), and line
# tables rather than full debug information: what the sanitizers' stack traces need, a fifth
# less to compile than -g.
cmake -S . -B build-test -DFCGI_HOST_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_UNITY_BUILD=ON \
      -DCMAKE_CXX_FLAGS_DEBUG=-g1
cmake --build build-test -j"$(nproc)"
stage_done "build"

# The later stages (ThreadSanitizer, the fuzz targets, the package's Release build) build after
# ctest, never beside it: on a small machine a build beside the tests takes the time their cases
# wait on, so how long ctest takes would depend on what the builds do (it spread from 267 to
# 657 s on 2 cores). Each stage says how long it took; the 20 slowest cases are listed at the end.
fuzz_stage=0
if [[ "${FCGI_HOST_SKIP_FUZZ:-0}" != 1 ]] && command -v clang++ >/dev/null; then fuzz_stage=1; fi
build_later_stages() {
  cmake -S . -B build-tsan -DFCGI_HOST_TSAN=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_UNITY_BUILD=ON
  cmake --build build-tsan -j"$(nproc)" --target threads_tests
  if (( fuzz_stage )); then bash scripts/fuzz.sh --build-only; fi
  if [[ "${FCGI_HOST_PACKAGE_TEST:-0}" == 1 ]]; then
    PACKAGE_BUILD_DIR="$PWD/build-package" bash scripts/package-test.sh --build-only
  fi
}
# The 20 slowest cases of this run's ctest, from its JUnit report: where the suite's time goes.
# (awk takes the first 20 and reads on: a `head` closing the pipe early would kill `sort` with
# SIGPIPE once the report outgrows a pipe's buffer, and under pipefail end the run with 141.)
junit="$PWD/build-test/ctest-junit.xml"
slowest_cases() {
  [[ -s $junit ]] || return 0
  echo
  echo "The 20 slowest cases of ctest (seconds):"
  grep -o '<testcase name="[^"]*"[^>]* time="[0-9.]*"' "$junit" |
    sed -E 's/^<testcase name="([^"]*)".* time="([0-9.]*)"$/\2\t\1/; s/&quot;/"/g; s/&apos;/'"'"'/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g' |
    sort -t$'\t' -k1,1 -rn | awk -F'\t' 'NR <= 20 { printf "  %6.1f  %s\n", $1, $2 }'
}
cd build-test
# Sanitizer reports fail the run; leak checking stays on.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
if (( repeat > 0 )); then
  exec bash ../scripts/stress.sh "$repeat" "$@"
fi
rm -f "$junit"
trap slowest_cases EXIT
set +e
# Two at a time: the process and integration tests hold at -j2 beside two CPU hogs
# (scripts/stress.sh), and their waits overlap; it halves the stage.
ctest --output-on-failure --timeout 600 -j2 --output-junit "$junit" "$@" | tee ctest-output.log
status=${PIPESTATUS[0]}
set -e
skipped=$(sed -n '/The following tests did not run:/,/^$/p' ctest-output.log | grep '(Skipped)' || true)
if [[ -n $skipped ]]; then
  echo
  echo "Skipped here (they could not run on this machine; not counted as passed):"
  sed -E 's/^[[:space:]]*[0-9]+ - /  /; s/ \(Skipped\)$//' <<<"$skipped"
fi
stage_done "ctest"
(( status == 0 )) || exit "$status"
cd ..
build_later_stages
stage_done "the later stages' builds"

# The threaded worker under ThreadSanitizer (it cannot share a build with AddressSanitizer): one
# small target, the in-process --threads tests, which link the worker's library (fcgi_serving)
# alone, so this build compiles neither the command line nor the pools; a race fails the run.
TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}" build-tsan/tests/threads_tests
stage_done "threads under ThreadSanitizer"
cd build-test

# Containers: the images, the Kubernetes manifest played by podman, the pod stopped under load
# (scripts/kube-test.sh; one "SKIPPED" line where podman cannot run containers). The host's
# image takes this build's binary (no Release build); about a minute, bounded at 5.
(cd .. && timeout 300 bash scripts/kube-test.sh --binary build-test/fcgi_host/fcgi-host)
stage_done "containers"

# The benchmark must keep working for a newcomer: its smoke mode (a few seconds,
# fcgi-host, the bare libfcgi loop and the limit responder behind nginx) twice in
# a row, so that a run which leaves something behind breaks the second one.
if [[ "${FCGI_HOST_SKIP_BENCH_SMOKE:-0}" != 1 ]]; then
  for run in 1 2; do
    echo "bench smoke run $run"
    timeout 120 bash ../scripts/bench.sh --smoke --build-dir . >/dev/null
  done
  # The direct benchmark (no nginx: its own FastCGI load generator), once.
  echo "bench-direct smoke run"
  timeout 120 bash ../scripts/bench-direct.sh --smoke --build-dir . >/dev/null
  stage_done "bench smokes"
fi

# Fuzz the FastCGI boundary and the handler API parsers briefly: 3 targets x 10 s (plus the clang
# build into build-fuzz/ of the libraries they exercise only: fcgi_protocol, fcgi_codec, app).
if (( fuzz_stage )); then
  (cd .. && bash scripts/fuzz.sh 10)
  stage_done "fuzz"
fi

# Packaging: builds (a Release build of what the package ships: no tests, examples or benchmark
# programs), installs and removes the fcgi-host .deb (root only; on in CI).
if [[ "${FCGI_HOST_PACKAGE_TEST:-0}" == 1 ]]; then
  (cd .. && PACKAGE_BUILD_DIR="$PWD/build-package" bash scripts/package-test.sh)
  stage_done "package"
fi
