# Shell helpers shared by scripts/bench.sh and scripts/bench-workloads.sh (sourced, not run).
# Processes are only ever looked up by pid: other runs on the same machine start the same
# programs, so nothing here matches processes by name.

# alive PID: a zombie (an exited but unreaped child) counts as dead.
alive() {
  local s
  s=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $s != Z* ]]
}

# children_of PID: its child pids, one a line, from /proc.
children_of() {
  cat /proc/"$1"/task/*/children 2>/dev/null | tr -s ' ' '\n' | grep -E '^[0-9]+$' || true
}

# free_port: a random 127.0.0.1 port with no socket in any state on it.
free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % 30000))
    if [[ -z $(ss -Htan "sport = :$p") ]]; then
      echo "$p"
      return 0
    fi
  done
  echo "no free TCP port found" >&2
  return 1
}

# nginx_temp_paths DIR: the http-block lines that keep a private nginx's temp files in DIR.
nginx_temp_paths() {
  local k
  for k in client_body proxy fastcgi uwsgi scgi; do
    printf '    %s_temp_path %s/%s;\n' "$k" "$1" "$k"
  done
}
