#!/usr/bin/env bash
# setup.sh - installs what zkqueue and its tests need, idempotently:
#   .venv/          the Python package (editable) with its test extras
#   .interop/       snarkjs and circom2 from npm: the independent verifier and the circuit
#                   compiler the interop tests use; playwright-core, which drives Debian's
#                   chromium (installed with apt-get when missing) in tests/test_flower.py
# Safe to run again; each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v g++ >/dev/null || need_apt+=(g++)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)   # headless, for the Flower dashboard test
command -v ip >/dev/null || need_apt+=(iproute2)   # network namespaces: the fleet tests' hosts
command -v unshare >/dev/null || need_apt+=(util-linux)
command -v openssl >/dev/null || need_apt+=(openssl)   # the fleet tests' CA and certificates
command -v redis-server >/dev/null || need_apt+=(redis-server)   # the fleet tests run their own (TLS, Sentinel)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

SNARKJS_VERSION=0.7.6
CIRCOM2_VERSION=0.2.23
PLAYWRIGHT_CORE_VERSION=1.65.1   # the driver only: it never downloads a browser
if [ ! -f .interop/node_modules/snarkjs/package.json ] || \
   [ "$(node -p "require('./.interop/node_modules/snarkjs/package.json').version")" != "$SNARKJS_VERSION" ] || \
   [ ! -f .interop/node_modules/circom2/package.json ] || \
   [ ! -f .interop/node_modules/playwright-core/package.json ]; then
  mkdir -p .interop
  (cd .interop && [ -f package.json ] || echo '{"name": "zkqueue-interop", "private": true}' > package.json)
  npm install --prefix .interop --no-package-lock --no-audit --no-fund -s \
      "snarkjs@$SNARKJS_VERSION" "circom2@$CIRCOM2_VERSION" "playwright-core@$PLAYWRIGHT_CORE_VERSION"
fi

# Build the native CPU kernels now rather than inside the first test.
.venv/bin/python -c 'from zkqueue.groth16 import native; print("setup: native kernels at", native.library_path())'
