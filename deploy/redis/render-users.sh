#!/bin/sh
# render-users.sh TEMPLATE OUT - writes the ACL file Redis loads (redis-server --aclfile OUT)
# from users.acl: comments dropped, each %ROLE% replaced by the sha256 of $REDIS_ROLE_PASSWORD
# (ADMIN, WORKER, CLIENT, REPLICA, SENTINEL), so no password is stored in clear, and %DB% by
# $REDIS_DB (default 0: the database number in ZKQUEUE_REDIS_URL). A role whose variable is
# unset or empty is switched off (it cannot log in).
set -eu
template=$1 out=$2
tmp="$out.tmp.$$"
db=${REDIS_DB:-0}
case "$db" in ''|*[!0-9]*) echo "render-users.sh: REDIS_DB=$db is not a database number" >&2; exit 2;; esac
umask 077
: > "$tmp"
grep -v '^[[:space:]]*#' "$template" | grep -v '^[[:space:]]*$' | while IFS= read -r line; do
  for role in ADMIN WORKER CLIENT REPLICA SENTINEL; do
    case "$line" in *"%$role%"*)
      pw=$(eval "printf '%s' \"\${REDIS_${role}_PASSWORD:-}\"")
      if [ -n "$pw" ]; then
        rule="#$(printf '%s' "$pw" | sha256sum | cut -d' ' -f1)"
      else
        rule="off"
      fi
      line=$(printf '%s\n' "$line" | sed "s/%$role%/$rule/")
    esac
  done
  printf '%s\n' "$line" | sed "s/%DB%/$db/g" >> "$tmp"
done
mv "$tmp" "$out"
