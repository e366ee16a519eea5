#!/usr/bin/env bash
# Makes sure a Redis answers on REDIS_URL (default redis://127.0.0.1:6379); starts a local
# redis-server on that port when nothing answers and the URL points at this machine.
set -euo pipefail
url="${REDIS_URL:-redis://127.0.0.1:6379}"
hostport="${url#redis://}"; hostport="${hostport##*@}"; hostport="${hostport%%/*}"
host="${hostport%%:*}"; port="${hostport##*:}"; [ "$port" = "$host" ] && port=6379
ping() { (exec 3<>"/dev/tcp/$host/$port" && printf 'PING\r\n' >&3 && timeout 2 head -c 5 <&3 | grep -q PONG) 2>/dev/null; }
if ping; then exit 0; fi
case "$host" in 127.0.0.1|localhost|::1) ;; *) echo "Redis at $url does not answer; start it or set REDIS_URL" >&2; exit 1;; esac
if ! command -v redis-server >/dev/null; then
  echo "redis-server is not installed; installing it (apt-get)" >&2
  (apt-get update -qq && apt-get install -y -qq redis-server) >&2 || { echo "could not install redis-server; start Redis at $url" >&2; exit 1; }
fi
echo "starting redis-server on $host:$port" >&2
redis-server --daemonize yes --bind "$host" --port "$port" --save "" --appendonly no --maxmemory-policy noeviction >/dev/null
for _ in $(seq 1 50); do ping && exit 0; sleep 0.1; done
echo "redis-server did not start on $host:$port" >&2; exit 1
