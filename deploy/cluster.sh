#!/usr/bin/env bash
# Runs N turtlekv-server shards and one twemproxy (nutcracker) in front of
# them, with consistent hashing (ketama), on this machine.
#
#   deploy/cluster.sh start DATA_DIR          start every shard, then the proxy
#   deploy/cluster.sh start-shard DATA_DIR I  (re)start shard I alone
#   deploy/cluster.sh stop DATA_DIR           SIGTERM the proxy and the shards
#
# Settings (environment): SHARD_PORTS (default "7001 7002 7003": one shard
# per port), PROXY_PORT (22121), STATS_PORT (twemproxy's statistics,
# 22222), SYNC (always|everysec|no, default always), CACHE (e.g. 1GiB;
# default the engine's), SERVER_ARGS (more options for every shard, e.g.
# "--compression none"), TURTLEKV_SERVER (the binary, default
# turtlekv-server on PATH), NUTCRACKER (default nutcracker).
# Every process started is recorded in DATA_DIR/<name>.pid and stopped by
# that pid only.
set -euo pipefail

cmd=${1:?usage: cluster.sh start|start-shard|stop DATA_DIR [I]}
data=${2:?usage: cluster.sh start|start-shard|stop DATA_DIR [I]}
read -r -a ports <<< "${SHARD_PORTS:-7001 7002 7003}"
proxy_port=${PROXY_PORT:-22121}
sync=${SYNC:-always}
server=${TURTLEKV_SERVER:-turtlekv-server}
nutcracker=${NUTCRACKER:-nutcracker}
mkdir -p "$data"

wait_for_ping() {
  local port=$1
  for _ in $(seq 1 300); do
    if [ "$(redis-cli -p "$port" PING 2>/dev/null)" = "PONG" ]; then
      return 0
    fi
    sleep 0.1
  done
  echo "nothing answers PING on port $port" >&2
  return 1
}

start_shard() {
  local i=$1
  local port=${ports[$i]}
  local extra=()
  if [ -n "${CACHE:-}" ]; then
    extra+=(--cache "$CACHE")
  fi
  if [ -n "${SERVER_ARGS:-}" ]; then
    read -r -a more <<< "$SERVER_ARGS"
    extra+=("${more[@]}")
  fi
  "$server" --dir "$data/shard$i" --bind "127.0.0.1:$port" --sync "$sync" "${extra[@]}" \
    >> "$data/shard$i.log" 2>&1 &
  echo $! > "$data/shard$i.pid"
  wait_for_ping "$port"
}

write_proxy_config() {
  # Shards are named: ketama hashes the names, not the addresses, so a
  # shard keeps its keys when it moves to another address or machine.
  {
    echo "turtlekv:"
    echo "  listen: 127.0.0.1:$proxy_port"
    echo "  hash: fnv1a_64"
    echo "  distribution: ketama"
    echo "  redis: true"
    echo "  auto_eject_hosts: false"
    echo "  timeout: 5000"
    echo "  server_retry_timeout: 500"
    echo "  server_failure_limit: 1"
    echo "  preconnect: true"
    echo "  servers:"
    for i in "${!ports[@]}"; do
      echo "    - 127.0.0.1:${ports[$i]}:1 shard$i"
    done
  } > "$data/nutcracker.yml"
}

stop_pid_file() {
  local file=$1
  [ -f "$file" ] || return 0
  local pid
  pid=$(cat "$file")
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -f "$file"
}

case "$cmd" in
  start)
    for i in "${!ports[@]}"; do
      start_shard "$i"
    done
    write_proxy_config
    "$nutcracker" -c "$data/nutcracker.yml" -o "$data/nutcracker.log" \
      -s "${STATS_PORT:-22222}" -a 127.0.0.1 &
    echo $! > "$data/nutcracker.pid"
    wait_for_ping "$proxy_port"
    echo "proxy on 127.0.0.1:$proxy_port, shards on ports ${ports[*]}"
    ;;
  start-shard)
    start_shard "${3:?shard index}"
    ;;
  stop)
    stop_pid_file "$data/nutcracker.pid"
    for i in "${!ports[@]}"; do
      stop_pid_file "$data/shard$i.pid"
    done
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
