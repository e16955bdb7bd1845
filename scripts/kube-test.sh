#!/usr/bin/env bash
# Plays conf/kubernetes/fcgi-host.yaml with `podman kube play` as shipped first (its two replicas
# ready, nothing published on the host, the status pages closed to the network but through
# nginx's metrics port, the sandbox on; then the manifest's own `kube down` command leaves no pod,
# container or volume), then a copy of it, and checks what a cluster would:
# builds the images (scripts/image.sh), starts the pod, sends requests through its nginx, runs the
# probes (the host's /readyz and /livez on its master's health port), reads the metrics (the
# health port's /metrics, nginx's metrics port), then stops the pod as the kubelet does, under
# load with slow requests in flight (the load stops and nginx has accepted what it sent, as after
# the preStop pause; QUIT to nginx, TERM to the host once nginx stopped listening): every request
# that had been accepted must be answered, the ping and /readyz must answer 503 during the drain
# (/livez 200), both containers exit 0.
# Removes every pod, container, volume, network and image it made.
#
# podman is configured here, not by the system: a CONTAINERS_CONF of its own (runc, cgroupfs,
# ulimits within this shell's hard limits). Where podman cannot run containers (not installed, not
# root, no runtime, a sandbox that forbids it) it prints one line, "kube-test: SKIPPED: why", and
# exits 0. Run by scripts/test.sh, with the test build's binary.
#
# Usage: scripts/kube-test.sh [--binary FILE]
#   --binary FILE  the fcgi-host for the image (scripts/image.sh --binary), e.g. the sanitizer
#                  build's: no Release build then (the default, in build-image/)
#
# What the play copy changes, and why (the manifest itself stays as shipped):
#   - names get a suffix of this run (pods, ConfigMaps, the volumes podman makes of them);
#   - the images get this run's tag;
#   - one replica, and no containerPort: podman 4.3 publishes every containerPort on the host
#     (8080 may be taken on a shared machine); the test reaches the pod at its own address;
#   - with a sanitizer build, ASAN_OPTIONS for the host (no leak check at exit, see below);
#   - restartPolicy Never: the test stops the containers itself, as the kubelet does, by their
#     stop signals (podman 4.3 runs no preStop hook), and they must stay stopped.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=
while (($#)); do
  case $1 in
  --binary) binary=$(realpath "$2"); shift ;;
  *) echo "kube-test: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

say() { echo "kube-test: $*"; }
skip() {
  say "SKIPPED: $*"
  exit 0
}

command -v podman >/dev/null || skip "podman is not installed"
((EUID == 0)) || skip "needs root (rootful podman: the pod's address is reachable from here)"
command -v python3 >/dev/null && python3 -c 'import yaml' 2>/dev/null ||
  skip "python3-yaml is not installed"
command -v catatonit >/dev/null || [[ -x /usr/libexec/podman/catatonit ]] ||
  skip "catatonit is not installed (podman builds the pods' pause image with it)"

run=kt$$
tag=kube-test-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/fcgi-host-kube-test.XXXXXX")
source scripts/podman-conf.sh
use_private_podman_conf "$work"

# What podman makes for the first pod on a machine (its kube network, the pause image built with
# catatonit) goes too, unless it was there before.
network=podman-default-kube-network
network_was_there=0
podman network exists "$network" 2>/dev/null && network_was_there=1
pause_images_before=$(podman images -q --filter reference=localhost/podman-pause 2>/dev/null || true)
played=0
shipped_played=0
manifest=conf/kubernetes/fcgi-host.yaml
# The manifest's images (localhost/fcgi-host:0.1.0...) are this run's for the play as shipped;
# whatever held those names before gets them back at the end.
declare -A shipped_before=()
cleanup() {
  set +e
  ((shipped_played)) && podman kube down "$manifest" >/dev/null 2>&1 &&
    podman volume rm -f fcgi-host-config fcgi-host-nginx >/dev/null 2>&1
  for image in "${!shipped_before[@]}"; do
    podman rmi "$image" >/dev/null 2>&1 # (the sanitizer's image goes; a tag of ours only loses the name)
    [[ -n ${shipped_before[$image]} ]] && podman tag "${shipped_before[$image]}" "$image" >/dev/null 2>&1
  done
  ((played)) && podman kube play --down "$work/play.yaml" >/dev/null 2>&1
  podman pod rm -f "fcgi-host-$run-pod-0" >/dev/null 2>&1
  podman volume rm -f "fcgi-host-config-$run" "fcgi-host-nginx-$run" >/dev/null 2>&1
  podman rmi -f "localhost/fcgi-host:$tag" "localhost/fcgi-host-nginx:$tag" >/dev/null 2>&1
  if ((!network_was_there)) && podman network exists "$network" 2>/dev/null &&
    [[ -z $(podman ps -aq --filter "network=$network") ]]; then
    podman network rm "$network" >/dev/null 2>&1
  fi
  if [[ -z $pause_images_before ]] && [[ -z $(podman ps -aq) ]]; then
    podman images -q --filter reference=localhost/podman-pause | xargs -r podman rmi >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT

podman info >"$work/info.log" 2>&1 || skip "podman info fails: $(grep -m1 -i error "$work/info.log")"

started=$SECONDS
say "building the images (scripts/image.sh --tag $tag)"
bash scripts/image.sh --tag "$tag" ${binary:+--binary "$binary"} | sed 's/^image.sh: /kube-test: image /'
# A sanitizer build runs as it does in the suite, but for the leak check at exit: LeakSanitizer
# stops the process's threads with ptrace, which a pod's seccomp profile may refuse.
sanitized=0
[[ -n $binary ]] && ldd "$binary" | grep -q libasan && sanitized=1
if ! podman run --rm "localhost/fcgi-host:$tag" --version >"$work/run.log" 2>&1; then
  skip "podman cannot run a container here: $(head -c 300 "$work/run.log" | tr '\n' ' ')"
fi

# ---- The manifest as shipped ------------------------------------------------------------------
for name in fcgi-host-pod-0 fcgi-host-pod-1; do
  ! podman pod exists "$name" || skip "a pod $name exists already (another run of the manifest?)"
done
for image in $(python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "Deployment":
        for c in d["spec"]["template"]["spec"]["containers"]: print(c["image"])
' "$manifest"); do
  shipped_before[$image]=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  if [[ $image == localhost/fcgi-host:* ]] && ((sanitized)); then
    # The sanitizer build without its leak check at exit (see below), as the play copy sets it.
    printf 'FROM localhost/fcgi-host:%s\nENV ASAN_OPTIONS=detect_leaks=0\n' "$tag" |
      podman build --quiet -t "$image" -f - "$work" >/dev/null
  else
    podman tag "${image%:*}:$tag" "$image"
  fi
done
say "playing $manifest as shipped"
shipped_played=1
podman kube play "$manifest" >"$work/shipped.log" 2>&1 || {
  cat "$work/shipped.log"
  exit 1
}
shipped_fail() {
  say "FAILED (as shipped): $*"
  podman logs fcgi-host-pod-0-fcgi-host 2>&1 | tail -20
  exit 1
}
for replica in 0 1; do
  spod=fcgi-host-pod-$replica
  infra=$(podman pod inspect "$spod" --format '{{.InfraContainerID}}') || shipped_fail "no pod $spod"
  bindings=$(podman inspect "$infra" --format '{{len .HostConfig.PortBindings}}')
  [[ $bindings == 0 ]] || shipped_fail "$spod publishes $bindings port(s) on the host"
  sip=$(podman inspect "$infra" --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}')
  ready=0
  for _ in $(seq 150); do
    [[ $(curl -s -m 2 "http://$sip:8080/ping") == pong ]] && ready=1 && break
    sleep 0.2 # polling the pod's start, bounded: 150 tries
  done
  ((ready)) || shipped_fail "$spod: GET http://$sip:8080/ping (the readiness probe) never answered pong"
  [[ $(curl -s -m 5 "http://$sip:8080/echo?x=1") == *"query=x=1"* ]] || shipped_fail "$spod: GET /echo"
  page=$(curl -s -m 5 "http://$sip:9145/status?json")
  [[ $page == *'"sandbox":"on: landlock ABI '* ]] ||
    shipped_fail "$spod: the status page through :9145 does not say the sandbox is on: ${page:0:300}"
  [[ $(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$sip:8080/status") == 404 ]] ||
    shipped_fail "$spod: /status is served on the site's port"
  say "ok: $spod ready at $sip: no host port, /ping and :9145/status through nginx (sandbox on), /status not on :8080"
done
podman kube down "$manifest" >"$work/down.log" 2>&1 || { cat "$work/down.log"; shipped_fail "kube down"; }
podman volume rm fcgi-host-config fcgi-host-nginx >>"$work/down.log" 2>&1 ||
  { cat "$work/down.log"; shipped_fail "podman volume rm (the manifest's second command)"; }
shipped_played=0
left=$(podman ps -a --format '{{.Names}}' | grep -E '^fcgi-host-pod-[01]' || true)
left+=$(podman pod ps --format '{{.Name}}' | grep -E '^fcgi-host-pod-[01]$' || true)
left+=$(podman volume ls --format '{{.Name}}' | grep -E '^fcgi-host-(config|nginx)$' || true)
[[ -z $left ]] || shipped_fail "left after the manifest's kube down and volume rm: $left"
say "ok: the manifest's kube down and volume rm left no pod, container or volume"

# The play copy (see the top) and a check that the nginx ConfigMap is the image's config.
python3 - "$run" "$tag" conf/kubernetes/fcgi-host.yaml "$work/play.yaml" \
  conf/containers/nginx-sidecar.conf "$sanitized" <<'EOF'
import sys, yaml
run, tag, source, target, sidecar, sanitized = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(source)) if d]
def meaningful(text):
    return [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
for d in docs:
    if d["kind"] == "ConfigMap":
        if d["metadata"]["name"] == "fcgi-host-nginx" and \
                meaningful(d["data"]["nginx.conf"]) != meaningful(open(sidecar).read()):
            sys.exit("the ConfigMap fcgi-host-nginx differs from " + sidecar)
        d["metadata"]["name"] += "-" + run
    if d["kind"] == "Deployment":
        d["metadata"]["name"] += "-" + run
        d["spec"]["replicas"] = 1
        pod = d["spec"]["template"]["spec"]
        pod["restartPolicy"] = "Never"
        for c in pod["containers"]:
            c["image"] = c["image"].rsplit(":", 1)[0] + ":" + tag
            c.pop("ports", None)
            if sanitized == "1" and c["name"] == "fcgi-host":
                c["env"] = [{"name": "ASAN_OPTIONS", "value": "detect_leaks=0"}]
        for v in pod["volumes"]:
            if "configMap" in v:
                v["configMap"]["name"] += "-" + run
yaml.safe_dump_all(docs, open(target, "w"), sort_keys=False)
EOF

pod=fcgi-host-$run-pod-0
host=$pod-fcgi-host
nginx=$pod-nginx
say "playing conf/kubernetes/fcgi-host.yaml as pod $pod"
played=1
# (podman 4.3 logs that it cannot start the health check timers without systemd: the probes are
# run here instead.)
podman kube play "$work/play.yaml" >"$work/play.log" 2>&1 || {
  cat "$work/play.log"
  exit 1
}
infra=$(podman pod inspect "$pod" --format '{{.InfraContainerID}}')
ip=$(podman inspect "$infra" --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}')
[[ -n $ip ]] || { say "FAILED: the pod has no address"; exit 1; }

fail() {
  say "FAILED: $*"
  echo "--- fcgi-host's log"; podman logs "$host" 2>&1 | tail -30
  echo "--- nginx's errors and its last lines"
  podman logs "$nginx" 2>&1 | grep -E '\[(warn|error|crit|alert|emerg)\]| 50[0-9] ' | tail -20
  podman logs "$nginx" 2>&1 | tail -10
  exit 1
}

# Ready: a GET through nginx to the host's ping path answers 200 (bounded): nginx, the socket and
# a worker all serve.
ready=0
for _ in $(seq 100); do
  if [[ $(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$ip:8080/ping") == 200 ]]; then
    ready=1
    break
  fi
  sleep 0.2 # polling the pod's start, bounded: 100 tries
done
((ready)) || fail "GET http://$ip:8080/ping through nginx never answered 200"
say "pod $pod ready at $ip after $((SECONDS - started)) s (images included)"

body=$(curl -s -m 5 "http://$ip:8080/echo?x=1")
[[ $body == *"query=x=1"* ]] || fail "GET /echo?x=1 through nginx: $body"
say "ok: a GET through nginx reaches the host's worker"
body=$(curl -s -m 5 --data-binary 'hello from kube-test' "http://$ip:8080/echo")
[[ $body == *"hello from kube-test"* ]] || fail "POST /echo through nginx: $body"
say "ok: a POST body through nginx and back"
[[ $(curl -s -m 5 "http://$ip:8080/ping") == pong ]] || fail "/ping through nginx is not pong"
say "ok: GET /ping through nginx answers 200 pong"
# The host's probes, as the kubelet sends them: GETs to the master's health port.
probes=$(python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "Deployment":
        for c in d["spec"]["template"]["spec"]["containers"]:
            for kind in ("readinessProbe", "livenessProbe"):
                get = c.get(kind, {}).get("httpGet")
                if get: print(c["name"], kind, get["port"], get["path"])
' "$work/play.yaml")
[[ -n $probes ]] || fail "the manifest has no httpGet probe"
while read -r container kind port path; do
  code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$ip:$port$path")
  [[ $code == 200 ]] || fail "$kind of $container: GET :$port$path answered $code"
  say "ok: $kind of $container: GET :$port$path answers 200"
done <<<"$probes"
metrics=$(curl -s -m 5 -H 'Accept: application/openmetrics-text; version=1.0.0' \
  "http://$ip:9100/metrics")
[[ $metrics == *'fcgihost_up{pool="fcgi-host"} 1'* && $metrics == *"# EOF"* ]] ||
  fail "the health port's /metrics did not answer OpenMetrics: ${metrics:0:200}"
say "ok: Prometheus scrape of the health port's :9100/metrics answers OpenMetrics"
metrics=$(curl -s -m 5 -H 'Accept: application/openmetrics-text; version=1.0.0' \
  "http://$ip:9145/status")
[[ $metrics == *"fcgihost_up 1"* && $metrics == *"# EOF"* ]] ||
  fail "the metrics port did not answer OpenMetrics: ${metrics:0:200}"
say "ok: Prometheus scrape of :9145/status answers OpenMetrics"
[[ $(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$ip:8080/status") == 404 ]] ||
  fail "the status page is open on the site's port"
say "ok: /status is not served on the site's port"
start_line=$(podman logs "$host" 2>&1 | grep -m1 'listening on' || true)
[[ $start_line == *"2 workers (CPU quota 2)"* ]] ||
  fail "the CPU limit \"2\" did not make 2 workers: $start_line"
say "ok: limits.cpu \"2\" -> ${start_line#*listening on }"
top=$(podman top "$host" pid user args)
[[ $(awk 'NR == 2 { print $1, $2 }' <<<"$top") == "1 fcgi-host" ]] ||
  fail "fcgi-host is not PID 1 as the user fcgi-host: $top"
say "ok: fcgi-host is PID 1, every process runs as fcgi-host (uid 10001)"
[[ $(podman inspect "$host" --format '{{.HostConfig.ReadonlyRootfs}} {{.Config.User}}') == \
  "true 10001:10001" ]] || fail "the host's container is not read-only and non-root"
say "ok: read-only root file system, runAsUser 10001"

# The stop under load, in the kubelet's order, the pod already out of the Service (the load
# stops starting requests), slow requests in flight through nginx and the host: each image's
# stop signal to its PID 1 (nginx's QUIT; then, once nginx stopped listening, the host's TERM).
# During the drain the master's status socket is asked from outside, through the container's
# root, as the liveness command asks it (the same FastCGI request; no process started per
# question, which a sanitizer build makes slow).
nginx_signal=$(podman inspect "$nginx" --format '{{.Config.StopSignal}}')
host_signal=$(podman inspect "$host" --format '{{.Config.StopSignal}}')
[[ $nginx_signal == 3 && $host_signal == 15 ]] ||
  fail "stop signals: nginx $nginx_signal (want 3, QUIT), fcgi-host $host_signal (want 15, TERM)"
say "ok: stop signals: nginx QUIT, fcgi-host TERM (from the images)"
nginx_pid=$(podman inspect "$nginx" --format '{{.State.Pid}}')
host_pid=$(podman inspect "$host" --format '{{.State.Pid}}')
say "stopping the pod under load, 2 slow requests (6 s) in flight"
drain_ok=1
python3 - "$ip" "$nginx_pid" "$host_pid" <<'EOF' || drain_ok=0
import http.client, json, os, random, signal, socket, struct, sys, threading, time
ip, nginx_pid, host_pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
master = "/proc/%d/root/run/fcgi-host/status.sock" % host_pid
results, lock = [], threading.Lock()
started, written, in_flight_now = [0], [0], [0]  # the load's and the slow requests, under lock
serving = threading.Event()
serving.set()

def begin():
    """A request of the load (or a slow one) starts, unless the pod left the Service."""
    with lock:
        if not serving.is_set():
            return False
        started[0] += 1
        in_flight_now[0] += 1
        return True

def one(path, timeout=30, port=8080, counted=False):
    """GET on a new connection: (status, or "refused" / "failed"; text; seconds; body; start)."""
    t0 = time.monotonic()
    c = http.client.HTTPConnection(ip, port, timeout=timeout)
    settled = False
    def settle():  # written to nginx, or failed before
        nonlocal settled
        if counted and not settled:
            settled = True
            with lock:
                written[0] += 1
    try:
        try:
            c.connect()
        except OSError as e:
            return ("refused", str(e), 0.0, b"", t0)
        c.request("GET", path)
        settle()
        r = c.getresponse()
        body = r.read()
        return (r.status, body[:80], time.monotonic() - t0, body, t0)
    except OSError as e:
        return ("failed", repr(e), time.monotonic() - t0, b"", t0)
    finally:
        c.close()
        settle()
        if counted:
            with lock:
                in_flight_now[0] -= 1

def nginx_accept_queue():
    """Connections to :8080 that nginx has not accepted yet (a listening socket's rx_queue in
    /proc/net/tcp of the pod's network namespace); None once nothing listens there."""
    queued = None
    for table in ("tcp", "tcp6"):
        try:
            lines = open("/proc/%d/net/%s" % (nginx_pid, table)).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[1].endswith(":1F90") and f[3] == "0A":
                queued = (queued or 0) + int(f[4].split(":")[1], 16)
    return queued

def ask_master(path, query=""):
    """One FastCGI request to the master's status socket, as `fcgi-host status` and `ping`
    send it: (HTTP status, body); (None, b"") when it cannot be asked."""
    def record(kind, content):
        return struct.pack("!BBHHBx", 1, kind, 1, len(content), 0) + content
    def pair(name, value):
        name, value = name.encode(), value.encode()
        return bytes([len(name), len(value)]) + name + value  # each under 128 bytes
    uri = path + ("?" + query if query else "")
    params = b"".join(pair(n, v) for n, v in (
        ("GATEWAY_INTERFACE", "CGI/1.1"), ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("REQUEST_METHOD", "GET"), ("REQUEST_URI", uri), ("SCRIPT_NAME", path),
        ("DOCUMENT_URI", path), ("QUERY_STRING", query), ("CONTENT_LENGTH", "")))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    out, data = b"", b""
    try:
        s.connect(master)
        s.sendall(record(1, struct.pack("!HB5x", 1, 0)) + record(4, params) + record(4, b"") +
                  record(5, b""))
        ended = False
        while not ended:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            while len(data) >= 8:
                _, kind, _, length, padding = struct.unpack("!BBHHB", data[:7])
                if len(data) < 8 + length + padding:
                    break
                if kind == 6:
                    out += data[8:8 + length]
                ended |= kind == 3
                data = data[8 + length + padding:]
    except OSError:
        return (None, b"")
    finally:
        s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    status = 200
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"status:"):
            status = int(line.split()[1])
    return (status, body)

def master_status():
    status, body = ask_master("/status", "json")
    return json.loads(body) if status == 200 else {}

def client(n):
    i = 0
    while i < 100000 and begin():
        r = one("/echo?client=%d&i=%d" % (n, i), counted=True)
        with lock:
            results.append(r)
        i += 1

def gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[-1][0] in "ZX"
    except OSError:
        return True

def wait_gone(pid, limit):
    end = time.monotonic() + limit
    while not gone(pid) and time.monotonic() < end:
        time.sleep(0.01)
    return time.monotonic()

load = [threading.Thread(target=client, args=(n,)) for n in range(4)]
t_load = time.monotonic()
for t in load:
    t.start()
while len(results) < 500 and time.monotonic() - t_load < 30:  # under load: 500 answers
    time.sleep(0.05)
rate = len(results) / (time.monotonic() - t_load)
slow = []
def slow_one():
    if begin():
        slow.append(one("/echo?delay_ms=6000", counted=True))
slow_threads = [threading.Thread(target=slow_one) for _ in range(2)]
# A few ms apart, at random: the first worker's kept connections are passed on (--handoff-after,
# 2 ms) to the other just as it may take the second slow request; the stop must still find them.
for t in slow_threads:
    t.start()
    time.sleep(random.uniform(0, 0.004))
# Both slow requests inside the host's workers (the master's status page: the workers are busy),
# load requests queued behind them.
deadline = time.monotonic() + 10
while time.monotonic() < deadline and master_status().get("active processes", 0) < 2:
    time.sleep(0.02)
with lock:
    serving.clear()  # the pod left the Service's endpoints: no new request comes
    begun = started[0]
# What the preStop pause is for: the requests sent before the endpoint went have reached nginx
# (written, and accepted off its listen queue; one still queued at QUIT would be reset as nginx
# closes its listening socket).
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    with lock:
        all_written = written[0] >= begun
    if all_written and not nginx_accept_queue():
        break
    time.sleep(0.01)
t_quit = time.monotonic()
with lock:
    at_quit = in_flight_now[0]
os.kill(nginx_pid, signal.SIGQUIT)
while one("/ping", timeout=2)[0] != "refused" and time.monotonic() - t_quit < 10:
    time.sleep(0.01)
t_nginx_closed = time.monotonic()
os.kill(host_pid, signal.SIGTERM)
t_term = time.monotonic()
ping_503, in_flight, readyz, livez = None, None, None, None
while time.monotonic() - t_term < 10 and not gone(host_pid):
    if ask_master("/ping")[0] == 503:
        ping_503 = time.monotonic() - t_term
        in_flight = master_status().get("active processes")
        # The probes during the drain: out of the Service, not restarted.
        readyz = one("/readyz", timeout=2, port=9100)[0]
        livez = one("/livez", timeout=2, port=9100)[0]
        break
    time.sleep(0.01)
t_host_gone = wait_gone(host_pid, 60)
t_nginx_gone = wait_gone(nginx_pid, 60)
for t in slow_threads + load:
    t.join()
failed = [r for r in results + slow if r[0] != 200]
print("kube-test: load: 4 clients, %d requests (%.0f req/s through nginx), %d failed"
      % (len(results), rate, len([r for r in results if r[0] != 200])))
for r in slow:
    print("kube-test: slow request in flight at the stop: %s after %.2f s" % (r[0], r[2]))
print("kube-test: %d requests in flight through nginx at QUIT (the 2 slow ones and load queued "
      "behind them)" % at_quit)
print("kube-test: nginx stopped listening %.2f s after QUIT, exited %.2f s after QUIT"
      % (t_nginx_closed - t_quit, t_nginx_gone - t_quit))
print("kube-test: TERM to fcgi-host %.2f s after QUIT: its ping answered 503 after %s with %s "
      "worker(s) busy (then /readyz %s, /livez %s); it exited %.2f s after TERM (the drain)"
      % (t_term - t_quit, "%.2f s" % ping_503 if ping_503 is not None else "never",
         in_flight, readyz, livez, t_host_gone - t_term))
if failed:
    sys.exit("kube-test: FAILED: %d accepted requests failed: %s"
             % (len(failed), ["%s %s after %.2f s, begun %.2f s before QUIT"
                              % (r[0], r[1], r[2], t_quit - r[4]) for r in failed[:5]]))
if len(slow) != 2:
    sys.exit("kube-test: FAILED: a slow request did not end")
if ping_503 is None:
    sys.exit("kube-test: FAILED: the ping never answered 503 while the host drained")
if not in_flight:
    sys.exit("kube-test: FAILED: no request was in flight when the host's drain began")
if readyz != 503 or livez != 200:
    sys.exit("kube-test: FAILED: during the drain /readyz answered %s (not 503), /livez %s "
             "(not 200)" % (readyz, livez))
EOF
((drain_ok)) || fail "the stop under load (nginx's and fcgi-host's logs below)"
for c in "$host" "$nginx"; do
  code=$(podman inspect "$c" --format '{{.State.ExitCode}}')
  [[ $code == 0 ]] || fail "$c exited with code $code"
done
host_log=$(podman logs "$host" 2>&1)
[[ $host_log == *"all workers gone; master exits with code 0"* ]] || fail "no clean drain in the log"
[[ $host_log != *"left in the handoff channel"* ]] || fail "kept connections closed unanswered"
say "ok: both containers exited 0 (fcgi-host: \"all workers gone; master exits with code 0\")"
say "passed in $((SECONDS - started)) s"
