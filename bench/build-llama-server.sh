#!/usr/bin/env bash
# Builds llama.cpp's own llama-server from the source node-llama-cpp ships (its git bundle), once,
# into a cache directory; prints the binary's path. Same llama.cpp version as the addon lmd uses.
#   usage: bench/build-llama-server.sh [CACHE_DIR]   (default: ${XDG_CACHE_HOME:-~/.cache}/lmd-bench)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/lmd-bench}"
bundle="$root/node_modules/node-llama-cpp/llama/gitRelease.bundle"
src="$cache/llama.cpp"
bin="$src/build/bin/llama-server"
head="$(git bundle list-heads "$bundle" | awk '{print $1; exit}')"
if [[ -x "$bin" && -f "$src/.lmd-head" && "$(cat "$src/.lmd-head")" == "$head" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
rm -rf "$src"
git clone --quiet "$bundle" "$src" >&2
# A native CPU build with llama.cpp's defaults (OpenMP where the compiler has it), no curl, server only.
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
cmake --build "$src/build" --target llama-server -j "$(nproc)" >&2
echo "$head" > "$src/.lmd-head"
echo "$bin"
