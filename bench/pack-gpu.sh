#!/usr/bin/env bash
# Packs what `npm run bench -- --gpu cuda` needs on a GPU machine that has no network and no Node.js
# into one archive: this node binary, the built dist/ (without dist/packages), the production
# node_modules (without node-llama-cpp's prebuilt GPU packages and its llama.cpp sources) and the
# CUDA build bench/build-cuda.sh made (its libraries, llama-server and llama-bench).
#
#   usage: npm run build && bench/pack-gpu.sh [ARCHIVE]     (default .gpu/lmd-gpu.tar.xz)
#
# On the GPU machine: mkdir -p /opt/lmd && tar -C /opt/lmd -xJf ARCHIVE, put the directories of
# libcudart.so.13 and libcublas.so.13 on LD_LIBRARY_PATH, then from /opt/lmd:
#   bin/node dist/bench/run.js --gpu cuda --llama-server \
#     --llama-server-bin node_modules/node-llama-cpp/llama/localBuilds/linux-x64-cuda/Release/llama-server ...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
archive="$(realpath -m "${1:-.gpu/lmd-gpu.tar.xz}")"
builds=node_modules/node-llama-cpp/llama/localBuilds
[[ -f dist/src/main.js ]] || { echo "pack-gpu: no dist/: run npm run build" >&2; exit 2; }
[[ -L $builds/linux-x64-cuda && -f $builds/linux-x64-cuda/Release/llama-server ]] || { echo "pack-gpu: no CUDA build: run bench/build-cuda.sh" >&2; exit 2; }
build="$(readlink "$builds/linux-x64-cuda")"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
# The production dependencies, as the lock file names them.
node -e '
  const fs = require("fs");
  for (const [p, v] of Object.entries(require("./package-lock.json").packages))
    if (p && !v.dev && !p.startsWith("node_modules/@node-llama-cpp/") && fs.existsSync(p)) console.log(p);' |
  while read -r p; do mkdir -p "$stage/$(dirname "$p")"; [[ -e $stage/$p ]] || cp -a "$p" "$stage/$p"; done
rm -rf "$stage/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$stage/node_modules/node-llama-cpp/llama/llama.cpp" "$stage/$builds"
mkdir -p "$stage/$builds/$build/Release" "$stage/dist" "$stage/bin"
find "$builds/$build" -maxdepth 1 -type f \( -name '*.status' -o -name '*.json' \) ! -name compile_commands.json -exec cp -a {} "$stage/$builds/$build/" \;
(cd "$builds/$build/Release" && cp -a ./*.node libggml* libllama* libmtmd.so llama-server llama-bench ./*.json "$stage/$builds/$build/Release/")
ln -s "$build" "$stage/$builds/linux-x64-cuda"
cp -a dist/src dist/bench dist/scripts dist/native dist/src.sha256 "$stage/dist/"
cp package.json "$stage/"
cp "$(command -v node)" "$stage/bin/node"
mkdir -p "$(dirname "$archive")"
tar -C "$stage" -cf - . | xz -T0 -6 >"$archive"
echo "$archive ($(du -h "$archive" | cut -f1))"
