#!/usr/bin/env bash
# Ray for the offline GPU machine's Python, fetched on a machine with the package registry, into .device/:
#
#   bash bench/batch/bring_ray.sh
#
# .device/ray-wheels/      the wheels Ray needs besides itself (jsonschema, msgpack, protobuf, requests, ...),
#                          installed there with `pip install --no-index --find-links`
# .device/ray-site.tar.xz  Ray itself, unpacked as site-packages holds it, without what `eval.py batch` never
#                          starts (the dashboard's web client, the Java jars, RLlib, Data, Serve, Train, Tune,
#                          the LLM library) and with its three native binaries stripped of their symbol tables:
#                          Ray's wheel is 76 MiB and at most 64 MiB travel per GPU call, this is about 17 MiB.
#
# bench/batch/steps.sh (batch/setup) installs both. RAY_VERSION (2.60.0), PYTHON_VERSION (3.12) and PLATFORM
# (manylinux2014_x86_64) name what the GPU machine runs. Prints each file's size and the total.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RAY_VERSION=${RAY_VERSION:-2.60.0}
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
PLATFORM=${PLATFORM:-manylinux2014_x86_64}
OUT="$ROOT/.device"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
download() {
    python3 -m pip download -q --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
        --platform "$PLATFORM" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 "$@"
}

download --no-deps -d "$WORK/ray" "ray==$RAY_VERSION"
# Its dependencies (with theirs), as pip resolves them for that interpreter
download -d "$WORK/deps" "ray==$RAY_VERSION"
rm -f "$WORK"/deps/ray-*.whl
mkdir -p "$WORK/site"
# unpacked with the modes the wheel records (`python3 -m zipfile -e` drops them: raylet and gcs_server must run)
python3 - "$WORK"/ray/ray-*.whl "$WORK/site" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for info in wheel.infolist():
        path = wheel.extract(info, sys.argv[2])
        mode = info.external_attr >> 16
        if mode & 0o111:
            os.chmod(path, mode & 0o777)
PY
rm -rf "$WORK"/site/ray/{jars,rllib,data,serve,train,tune,llm} "$WORK/site/ray/dashboard/client"
strip --strip-unneeded "$WORK/site/ray/_raylet.so" "$WORK/site/ray/core/src/ray/raylet/raylet" \
    "$WORK/site/ray/core/src/ray/gcs/gcs_server"
echo "packing Ray $RAY_VERSION with xz (about 2 min)"
mkdir -p "$OUT"
rm -rf "$OUT/ray-wheels"
mv "$WORK/deps" "$OUT/ray-wheels"
tar -C "$WORK/site" -cf - . | xz -T0 -9 > "$OUT/ray-site.tar.xz.part"
mv "$OUT/ray-site.tar.xz.part" "$OUT/ray-site.tar.xz"
du -b "$OUT/ray-site.tar.xz" "$OUT"/ray-wheels/* | awk '{ t += $1; printf "%8.1f MiB  %s\n", $1 / 1048576, $2 }
    END { printf "%8.1f MiB  in all\n", t / 1048576 }'
