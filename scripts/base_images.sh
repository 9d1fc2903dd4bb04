#!/usr/bin/env bash
# base_images.sh - the local Debian base image CI builds zkqueue's Dockerfile and runs Redis on,
# for machines that reach the Debian mirror but no image registry.
#
#   scripts/base_images.sh        (DOCKER_HOST names the daemon to load it into)
#
# Prints one line, the image's tag: zkqueue-ci/bookworm:YYYYMMDD. It holds Debian bookworm
# (minbase) with python3, python3-venv, g++ and redis-server, so it serves both as the Dockerfile's
# BASE_IMAGE (in place of python:3.11-slim-bookworm, same Python 3.11) and as compose.yaml's
# REDIS_IMAGE (in place of redis:7-bookworm; Debian's Redis 7).
#
# The root filesystem is made with debootstrap once per day and kept as a tarball in
# $ZKQUEUE_CACHE_DIR (default ~/.cache/zkqueue/docker; older days are deleted); the image is
# imported from it whenever the daemon lacks it. Both steps are skipped when already done.
set -euo pipefail

MIRROR=${ZKQUEUE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# g++ too: the Dockerfile installs it when the base lacks it (python:*-slim), which would
# otherwise cost every CI build an apt-get run.
PACKAGES=python3,python3-venv,redis-server,ca-certificates,g++
cache=${ZKQUEUE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkqueue/docker}
day=$(date -u +%Y%m%d)
tag="zkqueue-ci/$SUITE:$day"
tarball="$cache/$SUITE-minbase-$day.tar"

if docker image inspect "$tag" >/dev/null 2>&1; then echo "$tag"; exit 0; fi

if [ ! -f "$tarball" ]; then
  if ! command -v debootstrap >/dev/null; then
    echo "base_images.sh: installing debootstrap with apt-get" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >&2
  fi
  mkdir -p "$cache"
  # Unpacked in memory where there is room (dpkg's fsyncs cost nothing on tmpfs): about a
  # third faster than on disk here.
  scratch=$cache
  if [ -d /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR==2 {print $4}')" -gt 2000000 ]; then scratch=/dev/shm; fi
  root=$(mktemp -d "$scratch/zkqueue-rootfs.XXXXXX")
  trap 'rm -rf "$root" "$root.log" "$tarball.part"' EXIT
  echo "base_images.sh: debootstrap $SUITE ($PACKAGES) from $MIRROR" >&2
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 || {
    echo "base_images.sh: debootstrap failed; last lines of its log:" >&2; tail -40 "$root.log" >&2; exit 1; }
  rm -f "$root.log"
  # What Debian's own container images do: updates and security sources, no service starts
  # from package scripts, no package lists or caches in the image.
  cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
EOF
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  # The image trusts what this machine trusts: the local CAs (e.g. of an HTTPS-inspecting egress
  # proxy) join Debian's bundle, and pip uses that bundle instead of its own copy of certifi's.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null
  fi
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/tmp/*
  tar -C "$root" --numeric-owner -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
  # Keep only today's root filesystem.
  find "$cache" -maxdepth 1 -name "$SUITE-minbase-*.tar" ! -name "$(basename "$tarball")" -delete
fi

docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  "$tarball" "$tag" >/dev/null
echo "$tag"
