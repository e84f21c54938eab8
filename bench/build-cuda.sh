#!/usr/bin/env bash
# Builds node-llama-cpp's CUDA backend from the llama.cpp source it ships (its git bundle), with
# node-llama-cpp's own build (`source download --gpu cuda`), and llama.cpp's llama-server in the same
# build: one compile of llama.cpp and its CUDA kernels for both sides of `npm run bench -- --gpu cuda`.
# The addon lands where node-llama-cpp looks for a local build (node_modules/node-llama-cpp/llama/
# localBuilds/, which `getLlama({ gpu: "cuda" })` prefers to the prebuilt packages); prints the path
# of the llama-server it built, beside the addon and the same libllama and libggml-cuda.
#
#   usage: CMAKE_CUDA_ARCHITECTURES=90-real bench/build-cuda.sh   (REBUILD=1: build again)
#
# CMAKE_CUDA_ARCHITECTURES: the GPUs to build for (90-real: H100/H200 only, the smallest build;
# `native` on a machine with the GPU). CUDAToolkit_ROOT: the toolkit, if nvcc is not on PATH.
# The CPU code is built for any x86-64 with AVX2 (GGML_NATIVE=OFF), so that a build made on one
# machine runs on the GPU machine. Executables are linked with --allow-shlib-undefined: libggml-cuda
# needs the driver's libcuda.so.1, which a build machine without an NVIDIA driver lacks (the
# toolkit's link stub is lib64/stubs/libcuda.so).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
builds=node_modules/node-llama-cpp/llama/localBuilds
# Built already (the link below and its llama-server): print it, unless REBUILD=1.
if [[ "${REBUILD:-}" != 1 && -x "$builds/linux-x64-cuda/Release/llama-server" && -f "$builds/linux-x64-cuda/buildDone.status" ]]; then
  echo "$root/$builds/linux-x64-cuda/Release/llama-server"
  exit 0
fi
export NODE_LLAMA_CPP_CMAKE_OPTION_CMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-native}"
export NODE_LLAMA_CPP_CMAKE_OPTION_GGML_NATIVE=OFF
export NODE_LLAMA_CPP_CMAKE_OPTION_LLAMA_BUILD_TOOLS=ON
export NODE_LLAMA_CPP_CMAKE_OPTION_LLAMA_BUILD_SERVER=ON
export NODE_LLAMA_CPP_CMAKE_OPTION_LLAMA_HTTPLIB=ON
export NODE_LLAMA_CPP_CMAKE_OPTION_LLAMA_OPENSSL=OFF
export NODE_LLAMA_CPP_CMAKE_OPTION_CMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined
npx --no node-llama-cpp source download --gpu cuda --noUsageExample >&2
# node-llama-cpp names a build with custom cmake options after their hash, and getLlama() looks for
# that name only when the same NODE_LLAMA_CPP_CMAKE_OPTION_* variables are set as it runs: link the
# build under the name a plain `getLlama({ gpu: "cuda" })` looks for, so the daemon needs none of them.
built="$(cd "$builds" && ls -dt linux-x64-cuda-*/ | grep -v '\.lock' | head -1)"
ln -sfn "${built%/}" "$builds/linux-x64-cuda"
echo "$root/$builds/linux-x64-cuda/Release/llama-server"
