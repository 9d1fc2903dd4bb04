#!/usr/bin/env bash
# docker.sh - a private Docker daemon for CI, and its stop.
#
#   scripts/docker.sh start WORK   start dockerd (as root) with its data root, exec root, socket,
#                                  pid file and log under WORK/docker/, unless one already answers
#                                  there; waits (bounded) until it answers. Prints the DOCKER_HOST
#                                  to use on stdout, nothing else.
#   scripts/docker.sh stop WORK    stop the daemon that `start` started, by the PID in its pid file
#                                  (SIGTERM, then SIGKILL after a grace period), then remove its
#                                  data root so the next run starts clean.
#
# The daemon is private: it never touches /var/lib/docker or /var/run/docker.sock, so a Docker
# the machine already runs is left alone. Containers reach the network through dockerd's NAT;
# compose.yaml publishes ports on 127.0.0.1 only.
set -euo pipefail

usage() { echo "usage: $0 start|stop WORK_DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
dir=$(mkdir -p "$2/docker" && cd "$2/docker" && pwd)
sock="$dir/docker.sock"
pidfile="$dir/dockerd.pid"
host="unix://$sock"
START_TIMEOUT_S=${ZKQUEUE_DOCKERD_START_TIMEOUT_S:-60}
STOP_GRACE_S=20

answers() { timeout 10 docker -H "$host" info >/dev/null 2>&1; }

case "$action" in
start)
  if answers; then echo "$host"; exit 0; fi
  [ "$(id -u)" = 0 ] || { echo "docker.sh: dockerd must start as root (uid is $(id -u))" >&2; exit 2; }
  need_apt=()
  command -v dockerd >/dev/null || need_apt+=(docker.io)
  command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || need_apt+=(docker-compose)
  if [ ${#need_apt[@]} -gt 0 ]; then
    echo "docker.sh: installing ${need_apt[*]} with apt-get" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"; } >&2
  fi
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "docker.sh: dockerd $(cat "$pidfile") runs but does not answer on $host; see $dir/dockerd.log" >&2
    exit 1
  fi
  rm -f "$pidfile" "$sock"
  mkdir -p "$dir/data" "$dir/exec"
  # setsid: the daemon outlives this script and is not hit by the caller's Ctrl-C; it is
  # stopped only by `docker.sh stop`, by its PID.
  setsid dockerd --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$pidfile" \
      --host "$host" --storage-driver overlay2 >"$dir/dockerd.log" 2>&1 < /dev/null &
  deadline=$((SECONDS + START_TIMEOUT_S))
  until answers; do
    if [ $SECONDS -ge $deadline ]; then
      echo "docker.sh: dockerd did not answer on $host within ${START_TIMEOUT_S} s; last log lines:" >&2
      tail -20 "$dir/dockerd.log" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "$host"
  ;;
stop)
  if [ ! -f "$pidfile" ]; then echo "docker.sh: no dockerd started under $dir" >&2; exit 0; fi
  pid=$(cat "$pidfile")
  t0=$SECONDS
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    deadline=$((SECONDS + STOP_GRACE_S))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "docker.sh: dockerd $pid still running after ${STOP_GRACE_S} s; SIGKILL" >&2
      kill -KILL "$pid"
      while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
  fi
  rm -f "$pidfile"
  t1=$SECONDS
  # dockerd unmounts its overlays on a clean stop; anything still mounted is left, not deleted.
  if ! grep -q " $dir/" /proc/mounts; then
    rm -rf "$dir/data" "$dir/exec"
    echo "docker.sh: dockerd $pid stopped in $((t1 - t0)) s, its data root removed in $((SECONDS - t1)) s" >&2
  else
    echo "docker.sh: mounts remain under $dir; data root kept" >&2
  fi
  ;;
*) usage ;;
esac
