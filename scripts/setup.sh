#!/usr/bin/env bash
# Idempotent set-up on Debian 12 as root: the Debian packages fsbench drives, uv, and the
# project's Python environment from the lockfile. Safe to run again: it installs only what
# is missing. `setup.sh --test` also installs what the tests need (Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools fsbench measures with (fio), formats with (mkfs.*), mounts with (FUSE drivers),
# compares against (xxhsum) and serves/compiles with (nginx, wrk, gcc, make).
PACKAGES=(
  fio ntfs-3g fuse2fs exfat-fuse exfatprogs xfsprogs btrfs-progs dosfstools e2fsprogs
  bpftrace
  xxhash util-linux mount psmisc kmod
  nginx-light wrk build-essential
  python3 python3-venv python3-dev libxxhash-dev ca-certificates
)

# --test adds what only the test suite needs: a real browser for the report's test.
if [ "${1:-}" = "--test" ]; then
  PACKAGES+=(chromium)
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs Debian packages)" >&2
  exit 3
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# uv from PyPI into its own venv (Debian's pip refuses system-wide installs, PEP 668).
if ! command -v uv >/dev/null 2>&1; then
  python3 -m venv /opt/fsbench-uv
  /opt/fsbench-uv/bin/pip install -q uv
  ln -sf /opt/fsbench-uv/bin/uv /usr/local/bin/uv
fi

# The environment exactly as locked; uses the system's Python 3.11+, never downloads one.
UV_PYTHON_DOWNLOADS=never uv sync --frozen -q
