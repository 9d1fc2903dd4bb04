#!/usr/bin/env bash
# redis.sh - makes sure a Redis answers on $ZKQUEUE_REDIS_URL's host/port (default
# 127.0.0.1:6379), starting a local, non-persistent one if none does.
set -euo pipefail
host=127.0.0.1 port=6379
if ! redis-cli -h "$host" -p "$port" ping >/dev/null 2>&1; then
  if ! command -v redis-server >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
  fi
  redis-server --daemonize yes --bind "$host" --port "$port" --save "" --appendonly no
  for _ in $(seq 50); do redis-cli -h "$host" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
redis-cli -h "$host" -p "$port" ping >/dev/null
