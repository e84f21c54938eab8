#!/usr/bin/env bash
# The lmd-cuda package on a machine with an NVIDIA GPU (not run in CI): its files, unpacked with
# dpkg-deb -x beside lmd's, serve a generation with every layer on the GPU, and the daemon says so.
#
#   bench/gpu-check.sh [--cuda-deb .gpu/lmd-cuda.deb | --cuda-root .gpu/root]
#                      [--lmd-deb FILE.deb | --lmd-root DIR | --lmd-dir DIR] [--preset bench-100m | --model FILE.gguf]
#                      [--port 11500] [--work DIR] [--keep]
#
# The CPU side is either the lmd package (--lmd-deb, unpacked into the same root: its bundled
# node, dist/ and production node_modules; --lmd-root: its files already unpacked) or a directory with a built dist/ and a production
# node_modules (--lmd-dir, default: this checkout; run with the node on PATH). The GPU side is the
# lmd-cuda package (--cuda-deb, default .gpu/lmd-cuda.deb), or its files already unpacked
# (--cuda-root, default .gpu/root when it has usr/lib/lmd/gpu). Pieces of a split package are joined
# first (.gpu/lmd-cuda.deb.part-* → .gpu/lmd-cuda.deb, the same for --lmd-deb); a --cuda-root may hold only
# usr/lib/lmd/gpu/linux-x64-cuda and its link (the CUDA 13 build, without the CUDA 12 -ext one).
# The layout is the installed one:
# <root>/usr/lib/lmd/{dist,node_modules,gpu}, the package's links in node_modules/@node-llama-cpp.
#
# The model: --model FILE.gguf, else scripts/make-model --preset (default bench-100m; needs this
# checkout's dist/scripts), else the demo model the daemon writes into an empty store.
#
# Checks, each printed as PASS/FAIL: the start log names the CUDA backend and the GPU, with no
# warning about lmd-cuda; a generation; /api/ps size_vram == size (every layer offloaded); the
# runner's "model loaded" line says gpu cuda and the layers; `lmd doctor` exits 0 and names the
# device (skipped when this lmd has no doctor command). Exit status: the number of failures.
#
# CUDA's runtime and cuBLAS come from the host: when the dynamic linker does not know
# libcudart.so.13 or .12, /usr/local/cuda's library directory is put on LD_LIBRARY_PATH.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CUDA_DEB=$REPO/.gpu/lmd-cuda.deb
CUDA_ROOT=""
LMD_DEB=""
LMD_ROOT=""
LMD_DIR=$REPO
PRESET=bench-100m
MODEL=""
PORT=11500
WORK=$REPO/.gpu/check
KEEP=0
while [ $# -gt 0 ]; do
	case $1 in
		--cuda-deb) CUDA_DEB=$2; shift 2 ;;
		--cuda-root) CUDA_ROOT=$2; shift 2 ;;
		--lmd-deb) LMD_DEB=$2; shift 2 ;;
		--lmd-root) LMD_ROOT=$2; shift 2 ;;
		--lmd-dir) LMD_DIR=$2; shift 2 ;;
		--preset) PRESET=$2; shift 2 ;;
		--model) MODEL=$2; shift 2 ;;
		--port) PORT=$2; shift 2 ;;
		--work) WORK=$2; shift 2 ;;
		--keep) KEEP=1; shift ;;
		-h | --help) sed -n '2,27p' "$0"; exit 0 ;;
		*) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
	esac
done

FAILURES=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; FAILURES=$((FAILURES + 1)); }
say() { echo "---- $*"; }

# dpkg-deb -x, or ar + tar where dpkg is missing.
unpack_deb() {
	if command -v dpkg-deb >/dev/null; then
		dpkg-deb -x "$1" "$2"
	else
		local member
		member=$(ar t "$1" | grep '^data\.tar') || return 1
		case $member in
			*.gz) ar p "$1" "$member" | tar -xz -C "$2" ;;
			*.xz) ar p "$1" "$member" | tar -xJ -C "$2" ;;
			*.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$2" ;;
			*) ar p "$1" "$member" | tar -x -C "$2" ;;
		esac
	fi
}

say "nvidia-smi"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || failed "nvidia-smi"

ROOT=$WORK/root
LIB=$ROOT/usr/lib/lmd
rm -rf "$WORK" && mkdir -p "$ROOT"

say "the CPU side"
if [ -n "$LMD_ROOT" ]; then
	cp -a "$LMD_ROOT/." "$ROOT/"
	NODE=$LIB/bin/node
elif [ -n "$LMD_DEB" ]; then
	if [ ! -f "$LMD_DEB" ] && compgen -G "$LMD_DEB.part-*" >/dev/null; then cat "$LMD_DEB".part-* >"$LMD_DEB"; fi
	unpack_deb "$LMD_DEB" "$ROOT" || { echo "gpu-check: cannot unpack $LMD_DEB" >&2; exit 2; }
	NODE=$LIB/bin/node
else
	[ -f "$LMD_DIR/dist/src/main.js" ] && [ -d "$LMD_DIR/node_modules/node-llama-cpp" ] ||
		{ echo "gpu-check: $LMD_DIR needs a built dist/ and node_modules (or give --lmd-deb)" >&2; exit 2; }
	mkdir -p "$LIB"
	# Copies, not links: node resolves modules from a file's real path, so node-llama-cpp must be in
	# this tree to find the package's binaries through this tree's node_modules.
	cp -a "$LMD_DIR/dist" "$LIB/dist"
	cp -a "$LMD_DIR/node_modules" "$LIB/node_modules"
	# A checkout's node_modules has npm's GPU packages (optional dependencies): the package's are tested.
	rm -rf "$LIB"/node_modules/@node-llama-cpp/linux-x64-cuda* "$LIB"/node_modules/@node-llama-cpp/linux-x64-vulkan
	node -e 'const p = require(process.argv[1] + "/package.json"); console.log(JSON.stringify({ name: p.name, version: p.version, type: p.type }))' "$LMD_DIR" >"$LIB/package.json"
	NODE=$(command -v node)
fi
echo "node: $NODE ($("$NODE" --version)); node-llama-cpp $("$NODE" -p "require('$LIB/node_modules/node-llama-cpp/package.json').version")"

say "the GPU side: lmd-cuda's files"
if [ -z "$CUDA_ROOT" ] && [ -d "$REPO/.gpu/root/usr/lib/lmd/gpu" ]; then CUDA_ROOT=$REPO/.gpu/root; fi
if [ -n "$CUDA_ROOT" ]; then
	cp -a "$CUDA_ROOT/." "$ROOT/"
else
	if [ ! -f "$CUDA_DEB" ] && compgen -G "$CUDA_DEB.part-*" >/dev/null; then cat "$CUDA_DEB".part-* >"$CUDA_DEB"; fi
	[ -f "$CUDA_DEB" ] || { echo "gpu-check: no $CUDA_DEB (or --cuda-root)" >&2; exit 2; }
	unpack_deb "$CUDA_DEB" "$ROOT" || { echo "gpu-check: cannot unpack $CUDA_DEB" >&2; exit 2; }
fi
ls -l "$LIB/node_modules/@node-llama-cpp/"
du -sh "$LIB/gpu"/* 2>/dev/null
[ -f "$LIB/node_modules/@node-llama-cpp/linux-x64-cuda/package.json" ] && pass "linux-x64-cuda linked where node-llama-cpp resolves it" ||
	failed "linux-x64-cuda not found through node_modules/@node-llama-cpp"
# The -ext part (a second libggml-cuda.so, for CUDA 12) is used only when CUDA 13's runtime is
# missing; a transfer may leave it out on a host with CUDA 13.
[ -f "$LIB/node_modules/@node-llama-cpp/linux-x64-cuda-ext/package.json" ] && echo "linux-x64-cuda-ext: present" || echo "linux-x64-cuda-ext: absent (CUDA 13's build only)"
# node-llama-cpp uses a prebuilt package only when its version is its own.
"$NODE" -e 'const [a, b] = process.argv.slice(1).map((d) => require(d + "/package.json").version); console.log(`node-llama-cpp ${a}, linux-x64-cuda ${b}`); process.exit(a === b ? 0 : 1)' \
	"$LIB/node_modules/node-llama-cpp" "$LIB/node_modules/@node-llama-cpp/linux-x64-cuda" && pass "versions match" || failed "versions differ"


# CUDA's runtime: the host's, found by the dynamic linker or in /usr/local/cuda.
if ! ldconfig -p | grep -qE 'libcudart\.so\.1[23] ' || ! ldconfig -p | grep -qE 'libcublas\.so\.1[23] '; then
	for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
		[ -e "$d/libcudart.so.13" ] || [ -e "$d/libcudart.so.12" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} && break
	done
fi
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"

STORE=$WORK/models
LOG=$WORK/daemon.log
mkdir -p "$STORE"
export SERVICE_HOST=127.0.0.1:$PORT SERVICE_MODELS=$STORE SERVICE_GPU=auto OLLAMA_HOST=127.0.0.1:$PORT
say "the daemon (SERVICE_GPU=auto)"
"$NODE" "$LIB/dist/src/main.js" serve >"$LOG" 2>&1 &
DAEMON=$!
cleanup() {
	kill -TERM "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
	[ "$KEEP" = 1 ] || rm -rf "$ROOT" "$STORE"
}
trap cleanup EXIT
lmd() { "$NODE" "$LIB/dist/src/main.js" "$@"; }
for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$PORT/api/version" >/dev/null && break; sleep 0.5; done
curl -sf "http://127.0.0.1:$PORT/api/version" || { cat "$LOG"; echo "gpu-check: the daemon did not answer" >&2; exit 2; }
echo

NAME=demo
if [ -z "$MODEL" ] && [ -f "$REPO/dist/scripts/make-model.js" ]; then
	MODEL=$WORK/$PRESET.gguf
	say "make-model --preset $PRESET"
	"$NODE" "$REPO/dist/scripts/make-model.js" --preset "$PRESET" --out "$MODEL" || { echo "make-model failed: the demo model is used"; MODEL=""; }
fi
if [ -n "$MODEL" ]; then
	NAME=gpucheck
	printf 'FROM %s\n' "$MODEL" >"$WORK/Modelfile"
	lmd create "$NAME" -f "$WORK/Modelfile" >/dev/null && pass "lmd create $NAME from $(basename "$MODEL")" || failed "lmd create"
fi

say "the start log"
for _ in $(seq 1 240); do grep -q '"msg":"llama.cpp backend' "$LOG" && break; sleep 0.5; done
grep -E 'llama.cpp backend|not used|SERVICE_GPU is' "$LOG"
grep -q '"msg":"llama.cpp backend: cuda' "$LOG" && pass "start log: backend cuda" || failed "start log: not the cuda backend"
grep -q 'lmd-cuda is installed but not used' "$LOG" && failed "start log warns about lmd-cuda" || pass "no warning about lmd-cuda"

say "a generation"
GEN=$(curl -sS -d "{\"model\":\"$NAME\",\"prompt\":\"Once upon a time\",\"stream\":false,\"options\":{\"num_predict\":32,\"seed\":1}}" "http://127.0.0.1:$PORT/api/generate")
echo "$GEN" | cut -c1-400
echo "$GEN" | grep -q '"done":true' && pass "generation" || failed "generation"

say "/api/ps"
PS=$(curl -sS "http://127.0.0.1:$PORT/api/ps")
echo "$PS"
"$NODE" -e '
  const m = JSON.parse(process.argv[1]).models[0];
  if (!m) { console.log("no model loaded"); process.exit(1); }
  console.log(`size ${m.size} size_vram ${m.size_vram}`);
  process.exit(m.size > 0 && m.size_vram === m.size ? 0 : 1);' "$PS" && pass "size_vram == size" || failed "size_vram != size"
grep '"msg":"model loaded"' "$LOG" | tail -1
grep '"msg":"model loaded"' "$LOG" | tail -1 | grep -q '"gpu":"cuda"' && pass "runner: gpu cuda" || failed "runner not on cuda"
lmd ps

say "lmd doctor"
if [ -f "$LIB/dist/src/cli/doctor.js" ] || lmd --help 2>&1 | grep -qw doctor; then
	DOC=$(lmd doctor 2>&1)
	RC=$?
	echo "$DOC"
	[ $RC -eq 0 ] && pass "lmd doctor exits 0" || failed "lmd doctor exit $RC"
	DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
	grep -qiE "cuda|${DEVICE:-NVIDIA}" <<<"$DOC" && pass "lmd doctor names the backend/device" || failed "lmd doctor does not name the device"
else
	echo "SKIP this lmd has no doctor command"
fi

say "nvidia-smi while loaded"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader || true
echo
echo "gpu-check: $FAILURES failure(s); daemon log: $LOG"
exit "$FAILURES"
