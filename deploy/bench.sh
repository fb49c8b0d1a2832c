#!/usr/bin/env bash
# The benchmarks of docs/server.md, "Benchmarks".
#
#   deploy/bench.sh memory          redis-server (AOF everysec, then always)
#                                   against turtlekv-server, one run
#   deploy/bench.sh out-of-memory   turtlekv-server in a 1 GiB memory cgroup
#                                   (v1 or v2; needs root), data ~3x that
#   deploy/bench.sh proxy           one server against 3 shards behind
#                                   twemproxy (deploy/cluster.sh)
#
# Settings (environment): TURTLEKV_SERVER (default
# target/release/turtlekv-server), WORK (scratch directory, default
# /tmp/turtlekv-bench), N (requests per test, default 1000000), LOAD_N
# (SETs of the out-of-memory load, default 10000000). Ports 6401-6404,
# 7101-7103, 22131 and 22232 must be free. Every process started is
# stopped by its pid.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
server=${TURTLEKV_SERVER:-$here/../target/release/turtlekv-server}
work=${WORK:-/tmp/turtlekv-bench}
n=${N:-1000000}
load_n=${LOAD_N:-10000000}

load() { cut -d' ' -f1-3 /proc/loadavg; }

# redis-benchmark against PORT; extra arguments follow.
bench() {
  local port=$1
  shift
  redis-benchmark -p "$port" -n "$n" -r 10000000 -c 50 -P 16 -q "$@" 2>&1 |
    tr '\r' '\n' | grep "per second"
}

wait_ping() {
  for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$1" PING 2>/dev/null)" = "PONG" ] && return 0
    sleep 0.1
  done
  echo "nothing answers on port $1" >&2
  return 1
}

# Starts a turtlekv-server on PORT over DIR with more options; sets $pid.
start_server() {
  local port=$1 dir=$2
  shift 2
  "$server" --dir "$dir" --bind "127.0.0.1:$port" "$@" > "$dir.log" 2>&1 &
  pid=$!
  wait_ping "$port"
}

stop() {
  kill -TERM "$1"
  wait "$1" || true
}

memory() {
  for fsync in everysec always; do
    rm -rf "$work" && mkdir -p "$work/redis"
    echo "== appendfsync/--sync $fsync, load $(load)"
    local tests=set,get,incr,mset
    [ "$fsync" = always ] && tests=set,incr
    redis-server --port 6401 --appendonly yes --appendfsync "$fsync" --save "" \
      --dir "$work/redis" > "$work/redis.log" 2>&1 &
    pid=$!
    wait_ping 6401
    echo "-- redis-server, AOF $fsync"
    bench 6401 -t "$tests"
    stop "$pid"
    for compression in lz4 none; do
      start_server 6402 "$work/tk-$compression" --sync "$fsync" --compression "$compression"
      echo "-- turtlekv-server --sync $fsync --compression $compression"
      bench 6402 -t "$tests"
      echo "   $(grep VmHWM /proc/$pid/status)"
      stop "$pid"
    done
  done
  echo "load after: $(load)"
  rm -rf "$work"
}

out_of_memory() {
  local limit=$((1 << 30)) cg
  rm -rf "$work" && mkdir -p "$work"
  if [ -d /sys/fs/cgroup/memory ]; then
    cg=/sys/fs/cgroup/memory/turtlekv-bench
    mkdir -p "$cg"
    echo "$limit" > "$cg/memory.limit_in_bytes"
  else
    cg=/sys/fs/cgroup/turtlekv-bench
    mkdir -p "$cg"
    echo "$limit" > "$cg/memory.max"
  fi
  start_server 6403 "$work/tk" --sync everysec --cache 384MiB --compression none
  echo "$pid" > "$cg/cgroup.procs"
  echo "== 1 GiB cgroup, load $(load)"
  echo "-- load: $load_n SETs of 512-byte values"
  redis-benchmark -p 6403 -t set -n "$load_n" -r 10000000 -d 512 -c 50 -P 16 -q 2>&1 |
    tr '\r' '\n' | grep "per second"
  echo "   directory: $(du -sh "$work/tk" | cut -f1)"
  echo "-- the standard run with 512-byte values"
  bench 6403 -t set,get,incr,mset -d 512
  redis-cli -p 6403 INFO turtlekv | grep -E "page_bytes_read|cache_misses"
  echo "   $(grep VmHWM /proc/$pid/status), load $(load)"
  stop "$pid"
  sleep 1
  rmdir "$cg"
  rm -rf "$work"
}

proxy() {
  rm -rf "$work" && mkdir -p "$work"
  echo "== load $(load)"
  start_server 6404 "$work/one" --sync everysec --compression none
  echo "-- one turtlekv-server, direct"
  bench 6404 -t set,get,incr,mset
  stop "$pid"
  export TURTLEKV_SERVER=$server SHARD_PORTS="7101 7102 7103" PROXY_PORT=22131 \
    STATS_PORT=22232 SYNC=everysec SERVER_ARGS="--compression none"
  "$here/cluster.sh" start "$work/cluster"
  echo "-- 3 shards behind twemproxy"
  bench 22131 -t set,get,incr,mset
  for port in $SHARD_PORTS; do
    echo "   shard on $port: $(redis-cli -p "$port" DBSIZE) keys"
  done
  "$here/cluster.sh" stop "$work/cluster"
  echo "load after: $(load)"
  rm -rf "$work"
}

case "${1:-}" in
  memory) memory ;;
  out-of-memory) out_of_memory ;;
  proxy) proxy ;;
  *)
    echo "usage: deploy/bench.sh memory|out-of-memory|proxy" >&2
    exit 2
    ;;
esac
