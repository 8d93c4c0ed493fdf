#!/usr/bin/env bash
# Bring bubblewrap to a machine that cannot install packages (the GPU machine): run this where Debian's archive
# is reachable; it extracts the bwrap binary into .tools/ (ignored by git). On the other machine carry .tools
# and set ARENA_BWRAP=$PWD/.tools/bwrap (util-linux's setpriv and prlimit are already there).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download bubblewrap >/dev/null)
dpkg-deb -x "$work"/bubblewrap_*.deb "$work/x"
mkdir -p .tools
cp "$work/x/usr/bin/bwrap" .tools/bwrap
grep -qx '/.tools/' .git/info/exclude 2>/dev/null || echo '/.tools/' >> .git/info/exclude
echo "bwrap $(.tools/bwrap --version | awk '{print $2}') in .tools/bwrap: export ARENA_BWRAP=\$PWD/.tools/bwrap"
