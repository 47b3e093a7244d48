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
  # `compare --kernel`: qemu boots the guest kernel through virtme-ng (a Python dependency),
  # which builds its initramfs around busybox; `file` reads a kernel image's release;
  # apt and dpkg fetch and unpack Debian's kernels.
  qemu-system-x86 busybox-static file apt dpkg
)

# --test adds what only the test suite needs: a real browser for the report's test, and what
# building libfuse 3.18 takes (the FUSE floor subject `passthrough_hp`, src/fsbench/fuse/libfuse.py;
# not in the default comparison, so the main command does not need them), and fuse2fs against it
# (`fuse2fs-3.18`, src/fsbench/fuse/fuse2fs.py: make, gcc, uuid-dev).
if [ "${1:-}" = "--test" ]; then
  PACKAGES+=(chromium meson ninja-build pkg-config liburing-dev libnuma-dev make gcc uuid-dev)
  # strace: the --dry-run test watches that the command starts no program and mounts nothing.
  PACKAGES+=(strace)
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

# --test: Iozone itself, the reference bench/matrix_vs_iozone.py measures fsbench's matrix
# against. It is in Debian's non-free component, which this machine's sources need not list:
# a private sources list and package lists, so the system's apt configuration stays as it is.
if [ "${1:-}" = "--test" ] && ! command -v iozone >/dev/null 2>&1; then
  apt_dir=/var/lib/fsbench/apt
  mkdir -p "$apt_dir/lists/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
    "http://deb.debian.org/debian bookworm main non-free" >"$apt_dir/sources.list"
  private=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt_dir/lists")
  echo "setup.sh: installing iozone3 (Debian non-free, through a private sources list)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get "${private[@]}" update -qq
  apt-get "${private[@]}" install -y -qq --no-install-recommends iozone3 >/dev/null
fi

# uv from PyPI into its own venv (Debian's pip refuses system-wide installs, PEP 668).
if ! command -v uv >/dev/null 2>&1; then
  python3 -m venv /opt/fsbench-uv
  /opt/fsbench-uv/bin/pip install -q uv
  ln -sf /opt/fsbench-uv/bin/uv /usr/local/bin/uv
fi

# The environment exactly as locked; uses the system's Python 3.11+, never downloads one.
# Byte-compiled here, once: where PYTHONDONTWRITEBYTECODE is set, every fsbench process would
# otherwise compile ~500 modules at start-up (~2 s here; 12-15x that in an emulated VM guest).
UV_PYTHON_DOWNLOADS=never uv sync --frozen -q --compile-bytecode
uv run --frozen -q python -m compileall -q src

# --test: fetch the guest kernels of the VM tests now (into the user's cache, with a private apt
# configuration), so the test suite does not pay the ~100 MB downloads inside its time.
if [ "${1:-}" = "--test" ]; then
  uv run --frozen -q python -c 'from fsbench.vm.kernels import resolve; resolve("debian-6.12"); resolve("debian-sid")'
  # NTFS's checker, ntfsck (unstable's ntfsprogs-plus with its libc6): ~2 MB, fetched once.
  uv run --frozen -q python -m fsbench.lab.ntfsck || echo "setup.sh: ntfsck is unavailable (ntfsfix -n checks NTFS)"
  # The FUSE floor's libfuse 3.18: fetched (private apt configuration) and built once into the
  # user's cache, so the tests do not pay the ~1 min build; reused after its sha256 is checked.
  # A failure is reported (doctor and the floor's tests say why) but does not stop the set-up.
  uv run --frozen -q python -m fsbench.fuse.libfuse || echo "setup.sh: the FUSE floor is unavailable"
  # fuse2fs (e2fsprogs 1.47.4) against that libfuse: ~40 s once, cached and checked the same way.
  uv run --frozen -q python -m fsbench.fuse.fuse2fs || echo "setup.sh: fuse2fs-3.18 is unavailable"
fi
