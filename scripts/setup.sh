#!/usr/bin/env bash
# setup.sh - installs what zkqueue and its tests need, idempotently:
#   .venv/          zkqueue's dependencies and test extras, the checkout itself on the venv's
#                   path (edits take effect at once) and the `zkqueue` command
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
# The checkout is not built by setuptools (an editable install's finder, imported at every
# start, costs `zkqueue prove` ~9 ms, and the build prints pages of warnings): the
# dependencies are installed from pyproject.toml, one plain .pth line puts the checkout on
# the venv's path (the mapped folders are then found beside zkqueue/: zkqueue/_checkout.py),
# and scripts/zkqueue is copied to .venv/bin with the venv's Python. Run again only when
# pyproject.toml, scripts/zkqueue or this file change.
stamp=$(cat pyproject.toml scripts/zkqueue scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.zkqueue-setup 2>/dev/null)" != "$stamp" ]; then
  .venv/bin/python -m pip install -qq --upgrade pip
  if compgen -G ".venv/lib/python3*/site-packages/zkqueue-*.dist-info" >/dev/null; then
    .venv/bin/python -m pip uninstall -q -y zkqueue     # an install of the package left by an older setup
  fi
  .venv/bin/python -c 'import tomllib' 2>/dev/null || .venv/bin/python -m pip install -qq tomli   # Python 3.10
  .venv/bin/python -c 'try: import tomllib
except ImportError: import tomli as tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["test"]))' > .venv/requirements.txt
  .venv/bin/python -m pip install -qq -r .venv/requirements.txt   # -qq: errors only
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD" > "$site/zkqueue-checkout.pth"
  { echo "#!$PWD/.venv/bin/python"; tail -n +2 scripts/zkqueue; } > .venv/bin/zkqueue
  chmod +x .venv/bin/zkqueue
  echo "$stamp" > .venv/.zkqueue-setup
fi
# Byte-compile the checkout, as pip does a wheel at install: Python writes no .pyc where
# PYTHONDONTWRITEBYTECODE is set, and compiling every module at every start costs `zkqueue
# prove` ~25 ms. Up-to-date files are skipped; a file edited since is compiled again here.
.venv/bin/python -m compileall -q zkqueue groth16 coordinator tasks workers api || true   # a syntax error shows in the tests

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
