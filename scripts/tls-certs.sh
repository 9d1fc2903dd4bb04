#!/usr/bin/env bash
# tls-certs.sh DIR NAME... - a CA and the certificates for Redis over TLS (openssl, EC P-256):
#   DIR/ca.crt, ca.key       the CA: every zkqueue process's ZKQUEUE_REDIS_CA_FILE (kept if present)
#   DIR/redis.crt, redis.key Redis's (and the sentinels') certificate, for each NAME (a DNS name or an
#                            IP address) and localhost/127.0.0.1; also a client certificate, as
#                            replicas present it to their primary
#   DIR/client.crt, .key     a client certificate: ZKQUEUE_REDIS_CERT_FILE / _KEY_FILE, for a Redis
#                            started with --tls-auth-clients yes
# compose.yaml mounts DIR (TLS_DIR, default ./.tls) and names the server `redis`:
#   scripts/tls-certs.sh .tls redis
set -euo pipefail
dir=${1:?usage: tls-certs.sh DIR NAME...}
shift
mkdir -p "$dir"
cd "$dir"
umask 077
days=825
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
if [ ! -f ca.crt ] || [ ! -f ca.key ]; then
  key ca.key
  openssl req -x509 -new -key ca.key -out ca.crt -subj "/CN=zkqueue Redis CA" -days "$days" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi
sans="DNS:localhost,IP:127.0.0.1"
for name in "$@"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then sans+=",IP:$name"; else sans+=",DNS:$name"; fi
done
issue() {  # issue NAME SUBJECT EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2"
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days "$days" \
    -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
issue redis "zkqueue redis" "subjectAltName=$sans\nextendedKeyUsage=serverAuth,clientAuth\n"
issue client "zkqueue client" "extendedKeyUsage=clientAuth\n"
# Readable by the containers' users (compose mounts the folder read-only).
chmod 644 ca.crt redis.crt client.crt
chmod 640 redis.key client.key
echo "$PWD"
