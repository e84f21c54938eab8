#!/bin/bash
# Install test for lmd's packages under a real systemd, in a booted Debian 12 container.
# Prints TAP (one line per step, each with its duration); test/packaging/install.test.ts runs it.
#
#   install-test.sh deb PACKAGE.deb    install, start, generate, stop, log, upgrade, purge, policy-rc.d
#   install-test.sh rpm PACKAGE.rpm    rpm -qpl/--scripts, rpm --root into a fresh root, boot, start, stop
#   install-test.sh gpu LMD.deb CUDA.deb VULKAN.deb   the GPU packages beside lmd on a host without a GPU:
#                                      installed, linked where node-llama-cpp looks, the fallback logged, kept by an upgrade
#   install-test.sh gpu-rpm LMD.rpm CUDA.rpm VULKAN.rpm   the same packages as rpms: rpm --root, reinstall of lmd, erase order
#   install-test.sh repack IN.deb OUT.deb VERSION [broken]   a newer build of IN (or one with a broken unit)
#   install-test.sh cleanup            stop and remove whatever a killed run left behind
#
# Needs root, mmdebstrap, systemd-nspawn (systemd-container), nsenter, curl-free host (curl runs
# inside the container), dpkg-deb and rpm. The Debian root is built once with mmdebstrap into
# $LMD_IT_ROOTFS and every container boots from an overlay on it, so each starts fresh.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${LMD_IT_WORK:-$REPO/dist/packaging/install-test}
ROOTFS=${LMD_IT_ROOTFS:-$REPO/dist/packaging/debian12-root}
PORT=11434
CONTAINER_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# --- TAP ---------------------------------------------------------------------------------------
N=0
STEP_OUT=$(mktemp)
trap 'rm -f "$STEP_OUT"; cleanup' EXIT

# step DESCRIPTION COMMAND...: runs the command; on failure prints its output as diagnostics
# and stops the scenario (later steps depend on earlier ones).
step() {
	local what=$1 start end secs
	shift
	start=$(date +%s.%N)
	"$@" >"$STEP_OUT" 2>&1
	local rc=$?
	end=$(date +%s.%N)
	secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
	N=$((N + 1))
	if [ $rc -eq 0 ]; then
		echo "ok $N - $what (${secs}s)"
	else
		echo "not ok $N - $what (${secs}s)"
		sed 's/^/# /' "$STEP_OUT" | tail -n 60
		echo "1..$N"
		exit 1
	fi
}

fail() { echo "$*" >&2; return 1; }

# --- the container -------------------------------------------------------------------------------
# State of the current container: $WORK/<name>/{merged,upper,work,nspawn.pid,leader.pid,cgroups,console.log}
NAME=""
LEADER=""

base_root() {
	if [ -x "$ROOTFS/usr/lib/systemd/systemd" ]; then
		echo "reusing $ROOTFS"
		return 0
	fi
	rm -rf "$ROOTFS.tmp"
	mmdebstrap --quiet --variant=apt --include=systemd,systemd-sysv,dbus,curl,procps bookworm "$ROOTFS.tmp" || return 1
	mv "$ROOTFS.tmp" "$ROOTFS"
}

# make_root NAME: a fresh overlay over the base root, not booted yet.
make_root() {
	NAME=$1
	local d=$WORK/$NAME
	teardown "$NAME"
	mkdir -p "$d/upper" "$d/work" "$d/merged"
	mount -t overlay "lmd-it-$NAME" -o "lowerdir=$ROOTFS,upperdir=$d/upper,workdir=$d/work" "$d/merged"
}

# boot: boots the current root; waits for its systemd to finish starting up.
boot() {
	local d=$WORK/$NAME pid leader="" i state
	[ -d /run/systemd/nspawn ] || touch "$WORK/created-run-systemd-nspawn"
	# --keep-unit and --register=no: there is no systemd on the host to ask for a scope or register with.
	systemd-nspawn -D "$d/merged" --boot --keep-unit --register=no --private-network \
		--machine="lmd-it-$NAME" --console=read-only </dev/null >"$d/console.log" 2>&1 &
	pid=$!
	echo "$pid" >"$d/nspawn.pid"
	for i in $(seq 1 100); do
		leader=$(pgrep -P "$pid" -x systemd || true)
		[ -n "$leader" ] && break
		kill -0 "$pid" 2>/dev/null || { cat "$d/console.log"; fail "systemd-nspawn exited"; return 1; }
		sleep 0.2
	done
	[ -n "$leader" ] || fail "no systemd inside the container after 20s" || return 1
	echo "$leader" >"$d/leader.pid"
	LEADER=$leader
	# Where nspawn put itself: its cgroups' parents get "payload" and "supervisor" children to remove later.
	sed -n 's/^[^:]*:\([^:]*\):\(.*\)\/supervisor$/\1 \2/p' "/proc/$pid/cgroup" >"$d/cgroups"
	# systemctl answers once systemd's private socket exists; poll rather than --wait, which fails before that.
	for i in $(seq 1 200); do
		state=$(cx systemctl is-system-running 2>/dev/null)
		case $state in running | degraded | maintenance | stopping | offline) break ;; esac
		sleep 0.3
	done
	case $state in
		running) echo "system $state" ;;
		degraded) echo "system degraded:"; cx systemctl --failed --no-legend ;;
		*) tail -n 30 "$d/console.log"; fail "system state '$state'" ;;
	esac
}

# cx COMMAND...: runs a command inside the container, with a clean environment.
cx() {
	nsenter -t "$LEADER" -a env -i PATH=$CONTAINER_PATH LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# teardown NAME: stops the container, unmounts its root, removes its cgroups and files.
teardown() {
	local d=$WORK/$1 pid i h rel mnt
	if [ -f "$d/nspawn.pid" ]; then
		pid=$(cat "$d/nspawn.pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null # nspawn asks the container's systemd to power off
			for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
			kill -KILL "$pid" 2>/dev/null
			for i in $(seq 1 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		fi
	fi
	if [ -f "$d/cgroups" ]; then
		while read -r h rel; do
			case $h in
				name=systemd) mnt=/sys/fs/cgroup/systemd ;;
				"") if [ -d /sys/fs/cgroup/unified ]; then mnt=/sys/fs/cgroup/unified; else mnt=/sys/fs/cgroup; fi ;;
				*) continue ;;
			esac
			for sub in payload supervisor; do
				[ -d "$mnt$rel/$sub" ] && find "$mnt$rel/$sub" -depth -type d -exec rmdir {} + 2>/dev/null
			done
		done <"$d/cgroups"
	fi
	if mountpoint -q "$d/merged" 2>/dev/null; then
		umount "$d/merged" 2>/dev/null || { sleep 1; umount "$d/merged" 2>/dev/null; } || umount -l "$d/merged"
	fi
	rm -rf "$d"
}

cleanup() {
	local d
	for d in "$WORK"/*/; do
		[ -d "$d" ] && teardown "$(basename "$d")"
	done
	if [ -f "$WORK/created-run-systemd-nspawn" ]; then
		rm -rf /run/systemd/nspawn
		rm -f "$WORK/created-run-systemd-nspawn"
	fi
	return 0
}

# --- checks inside the container -----------------------------------------------------------------
api() { cx curl -sS --fail-with-body --max-time 60 "$@"; }

# wait_api: the unit is active and the API answers; fails early when the service fails or restarts.
wait_api() {
	local i state restarts
	for i in $(seq 1 120); do
		if api -o /dev/null "http://127.0.0.1:$PORT/api/version" 2>/dev/null; then
			state=$(cx systemctl is-active lmd.service)
			[ "$state" = active ] || fail "API answers but lmd.service is '$state'" || return 1
			[ "$(cx systemctl is-enabled lmd.service)" = enabled ] || fail "lmd.service is not enabled" || return 1
			echo "active, enabled, answering after $((i / 2))s"
			return 0
		fi
		state=$(cx systemctl is-active lmd.service)
		restarts=$(cx systemctl show -P NRestarts lmd.service)
		if [ "$state" = failed ] || [ "${restarts:-0}" -gt 0 ]; then
			cx systemctl status --no-pager -l lmd.service
			cx journalctl -u lmd.service --no-pager -n 30
			fail "lmd.service is '$state' after ${restarts:-0} restarts"
			return 1
		fi
		sleep 0.5
	done
	cx systemctl status --no-pager -l lmd.service
	fail "the API did not answer within 60s"
}

# systemd-analyze verify exits 0 on many problems (typos in settings among them): any output fails.
check_verify() {
	local units out
	units=$(cx sh -c 'ls /usr/lib/systemd/system/lmd*.service') || return 1
	# shellcheck disable=SC2086 # one unit per word
	out=$(cx systemd-analyze verify --man=no $units 2>&1)
	echo "verified: $units"
	[ -z "$out" ] || fail "$out"
}

check_version() {
	local body
	body=$(api "http://127.0.0.1:$PORT/api/version") || return 1
	echo "$body"
	[ "$body" = "{\"version\":\"$1\"}" ] || fail "expected version $1"
}

check_generate() {
	local body
	body=$(api -d '{"model":"demo","prompt":"hello","stream":false,"options":{"num_predict":8,"seed":1}}' \
		"http://127.0.0.1:$PORT/api/generate") || { echo "$body"; return 1; }
	echo "$body" | cut -c1-300
	node -e 'const r = JSON.parse(process.argv[1]); if (r.done !== true || typeof r.response !== "string" || !(r.eval_count > 0)) process.exit(1)' "$body" ||
		fail "not a finished generation"
}

# journal_has JSONFIELDS: some journal entry of lmd.service has all these fields (MESSAGE: a prefix
# of the entry's; others equal, as strings). The daemon writes its records with journal fields.
journal_has() {
	local i lines
	for i in $(seq 1 20); do # journald may lag the daemon's last lines by a moment
		lines=$(cx journalctl -u lmd.service -o json --no-pager)
		if node -e "$JOURNAL_MATCH" "$1" "$lines"; then
			echo "found $1"
			return 0
		fi
		sleep 0.25
	done
	echo "$lines" | tail -n 20 | cut -c1-600
	fail "no journal entry with $1"
}

# node -e "$JOURNAL_MATCH" WANT LINES: exit 0 when one line of `journalctl -o json` matches WANT.
JOURNAL_MATCH='
const want = JSON.parse(process.argv[1]);
const ok = process.argv[2].split("\n").some((l) => {
	let e;
	try { e = JSON.parse(l); } catch { return false; }
	return Object.entries(want).every(([k, v]) => typeof e[k] === "string" && (k === "MESSAGE" ? e[k].startsWith(v) : e[k] === String(v)));
});
process.exit(ok ? 0 : 1)'

check_journal() {
	journal_has '{"MESSAGE":"lmd listening","PRIORITY":6,"LMD_VERSION":"'"$1"'"}' && journal_has '{"MESSAGE":"empty model store: wrote the demo model","LMD_MODEL":"demo"}' &&
		journal_has '{"MESSAGE":"model loaded","LMD_THREADPOOL":"persistent"}' # the runner has the packaged threadpool library
}

check_stop() {
	local main
	main=$(cx systemctl show -P MainPID lmd.service)
	echo "MainPID $main"
	cx systemctl stop lmd.service || return 1
	journal_has "{\"MESSAGE\":\"shutting down\",\"LMD_SIGNAL\":\"SIGTERM\",\"_PID\":\"$main\"}" &&
		journal_has "{\"MESSAGE\":\"model unloaded\",\"_PID\":\"$main\"}" &&
		journal_has "{\"MESSAGE\":\"all models unloaded; exiting\",\"_PID\":\"$main\"}" || return 1
	local show
	show=$(cx systemctl show -p Result -p ExecMainCode -p ExecMainStatus -p ActiveState lmd.service)
	echo "$show"
	grep -qx 'Result=success' <<<"$show" && grep -qx 'ExecMainStatus=0' <<<"$show" &&
		grep -qx 'ExecMainCode=1' <<<"$show" && grep -qx 'ActiveState=inactive' <<<"$show" ||
		fail "expected a clean exit (Result=success, status 0)"
	[ -z "$(cx pgrep -u lmd)" ] || fail "processes of user lmd are left: $(cx pgrep -a -u lmd)"
}

check_logfile() {
	local files
	files=$(cx sh -c 'ls /var/log/lmd/lmd*.log') || fail "no log file in /var/log/lmd" || return 1
	echo "$files"
	cx sh -c 'grep -q "\"msg\":\"all models unloaded; exiting\"" /var/log/lmd/lmd*.log' ||
		fail "the log file lacks the last line of the run"
	[ "$(cx stat -c %U /var/log/lmd)" = lmd ] || fail "/var/log/lmd is not owned by lmd"
}

models_digest() { cx sh -c 'cd /var/lib/lmd/models && find . -type f | sort | xargs sha256sum'; }

# upgrade NEWDEB NEWVERSION: the edited conffile and the models survive; the new build runs.
check_upgrade() {
	local before after
	cx sh -c 'echo SERVICE_ALLOWED_HOSTS=lmd.example.test >>/etc/lmd/lmd.env' || return 1
	before=$(models_digest) && [ -n "$before" ] || fail "no models before the upgrade" || return 1
	cp "$1" "$WORK/$NAME/merged/root/lmd-new.deb" || return 1
	cx dpkg -i /root/lmd-new.deb </dev/null || return 1
	wait_api || return 1
	check_version "$2" || return 1
	cx grep -qx 'SERVICE_ALLOWED_HOSTS=lmd.example.test' /etc/lmd/lmd.env || fail "the edit of /etc/lmd/lmd.env was lost" || return 1
	after=$(models_digest)
	[ "$before" = "$after" ] || fail "the models changed: $before / $after" || return 1
	echo "models kept: $(echo "$after" | wc -l) files"
	# The edit is in effect: the daemon accepts the extra Host header (403 without it).
	api -o /dev/null -H 'Host: lmd.example.test' "http://127.0.0.1:$PORT/api/version" ||
		fail "the restarted daemon does not use the edited configuration"
}

check_purge() {
	# The model loaded earlier opened the saved-prefix directory (SERVICE_CACHE_DIR's default): purge takes it too.
	cx test -d /var/lib/lmd/cache || fail "no /var/lib/lmd/cache before purge" || return 1
	cx dpkg --purge lmd </dev/null || return 1
	local p
	for p in /var/lib/lmd /var/log/lmd /etc/lmd /usr/lib/lmd /usr/lib/systemd/system/lmd.service; do
		if cx test -e "$p"; then fail "$p is left after purge"; return 1; fi
	done
	[ "$(cx systemctl is-active lmd.service)" != active ] || fail "lmd.service still active" || return 1
	[ -z "$(cx pgrep -u lmd)" ] || fail "processes of user lmd are left"
}

# With a policy-rc.d that forbids starting services, installing enables lmd but does not start it.
check_policy_rc_d() {
	cx sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d' || return 1
	cx dpkg -i /root/lmd.deb </dev/null || return 1
	cx rm -f /usr/sbin/policy-rc.d
	local state
	state=$(cx systemctl is-active lmd.service)
	[ "$state" = inactive ] || fail "policy-rc.d said no, yet lmd.service is '$state'" || return 1
	[ "$(cx systemctl is-enabled lmd.service)" = enabled ] || fail "lmd.service should still be enabled"
}

# --- the GPU packages ----------------------------------------------------------------------------
GPU_NPM="linux-x64-cuda linux-x64-cuda-ext linux-x64-vulkan"

# check_gpu_files OWNER_QUERY: each backend's npm package is in /usr/lib/lmd/gpu, owned by its GPU
# package, linked from node_modules/@node-llama-cpp; node-llama-cpp's own resolution finds it there;
# the lmd package ships none of them.
check_gpu_files() {
	local pkg owner bins
	for pkg in $GPU_NPM; do
		cx test -L "/usr/lib/lmd/node_modules/@node-llama-cpp/$pkg" || fail "no link /usr/lib/lmd/node_modules/@node-llama-cpp/$pkg" || return 1
		cx test -f "/usr/lib/lmd/node_modules/@node-llama-cpp/$pkg/package.json" || fail "the link for $pkg resolves to nothing" || return 1
		owner=$($1 "/usr/lib/lmd/gpu/$pkg/package.json") || return 1
		echo "$pkg: $owner"
		case $pkg in *cuda*) grep -q '^lmd-cuda' <<<"$owner" ;; *) grep -q '^lmd-vulkan' <<<"$owner" ;; esac || fail "$pkg is not owned by its GPU package" || return 1
	done
	# As node-llama-cpp resolves them: a bare import from its own directory.
	bins=$(cx sh -c 'cd /usr/lib/lmd/node_modules/node-llama-cpp && /usr/lib/lmd/bin/node --input-type=module -e "for (const p of [\"cuda\", \"cuda-ext\", \"vulkan\"]) console.log((await import(\"@node-llama-cpp/linux-x64-\" + p)).getBinsDir().binsDir)"') || return 1
	echo "$bins"
	[ "$bins" = "$(printf '/usr/lib/lmd/gpu/%s/bins\n' $GPU_NPM)" ] || fail "node-llama-cpp does not resolve the packaged binaries" || return 1
	cx test -f /usr/lib/lmd/gpu/linux-x64-cuda/bins/linux-x64-cuda/llama-addon.node || fail "no CUDA addon" || return 1
	cx test -f /usr/lib/lmd/gpu/linux-x64-vulkan/bins/linux-x64-vulkan/llama-addon.node || fail "no Vulkan addon"
}

deb_owner() { cx dpkg -S "$1"; }
check_deb_gpu_files() {
	check_gpu_files deb_owner || return 1
	if cx dpkg -L lmd | grep -E '@node-llama-cpp/linux-(x64-(cuda|vulkan)|arm)'; then fail "the lmd package ships GPU or arm binaries"; return 1; fi
	echo "lmd ships no GPU binaries"
}

# journal_text PRIORITY TEXT [PID]: a line of lmd's journal at PRIORITY or more urgent contains TEXT.
# While the daemon writes every line at priority 6 (JSON on stdout), its JSON "level" (pino's: 40
# warning, 30 info) stands for the priority.
journal_text() {
	local prio=$1 text=$2 pid=${3:-} i filter=() level
	[ -n "$pid" ] && filter=("_PID=$pid")
	case $prio in warning) level=40 ;; info) level=30 ;; esac
	for i in $(seq 1 40); do # the probe and journald may lag a moment behind the start
		if cx journalctl -u lmd.service -p "$prio" -o cat --no-pager "${filter[@]}" | grep -F -- "$text"; then
			return 0
		fi
		if ! cx journalctl -u lmd.service -o export --no-pager | grep -q '^PRIORITY=[0-5]$' &&
			cx journalctl -u lmd.service -o cat --no-pager "${filter[@]}" | grep -F -- "$text" | grep -E "\"level\":($level|[5-6]0)[,}]"; then
			echo "(at JSON level $level or above: this build writes no journal priorities)"
			return 0
		fi
		sleep 0.25
	done
	cx journalctl -u lmd.service -o cat --no-pager -n 30
	fail "no journal line at priority $prio with: $text"
}

check_gpu_fallback() {
	journal_text info "llama.cpp backend: cpu" "${1:-}" &&
		journal_text warning "lmd-cuda is installed but not used: the NVIDIA driver is not installed (no libcuda.so.1" "${1:-}" &&
		journal_text warning "lmd-vulkan is installed but not used: the Vulkan loader is not installed (no libvulkan.so.1" "${1:-}"
}

check_cpu_ps() {
	local body
	body=$(api "http://127.0.0.1:$PORT/api/ps") || return 1
	echo "$body"
	cx /usr/lib/lmd/bin/node -e 'const m = JSON.parse(process.argv[1]).models; if (m.length !== 1 || m[0].size_vram !== 0 || !(m[0].size > 0)) process.exit(1)' "$body" ||
		fail "expected the demo model loaded, none of it in VRAM"
}

# upgrade NEWDEB NEWVERSION: lmd is upgraded alone; the GPU packages stay installed and configured,
# their files and links in place, and the restarted daemon finds them again.
check_gpu_upgrade() {
	local main
	cp "$1" "$WORK/$NAME/merged/root/lmd-new.deb" || return 1
	cx dpkg -i /root/lmd-new.deb </dev/null || return 1
	wait_api && check_version "$2" || return 1
	cx dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\n' lmd lmd-cuda lmd-vulkan || return 1
	[ "$(cx dpkg-query -W -f '${db:Status-Abbrev}' lmd-cuda)" = "ii " ] && [ "$(cx dpkg-query -W -f '${db:Status-Abbrev}' lmd-vulkan)" = "ii " ] ||
		fail "a GPU package is no longer installed and configured" || return 1
	check_deb_gpu_files || return 1
	main=$(cx systemctl show -P MainPID lmd.service)
	check_gpu_fallback "$main"
}

scenario_gpu() {
	local deb=$1 cuda=$2 vulkan=$3 version newversion newdeb
	for f in "$deb" "$cuda" "$vulkan"; do [ -f "$f" ] || { echo "Bail out! no such package: $f"; exit 1; }; done
	version=$(deb_version "$deb")
	echo "TAP version 14"
	echo "# gpu scenario: $(basename "$deb") $(basename "$cuda") $(basename "$vulkan")"
	step "Debian 12 root (mmdebstrap)" base_root
	step "booted a fresh container under systemd-nspawn" eval 'make_root gpu && boot'
	step "dpkg -i installs lmd, lmd-cuda and lmd-vulkan together" eval 'cp "$deb" "$WORK/$NAME/merged/root/lmd.deb" && cp "$cuda" "$WORK/$NAME/merged/root/lmd-cuda.deb" && cp "$vulkan" "$WORK/$NAME/merged/root/lmd-vulkan.deb" && cx dpkg -i /root/lmd.deb /root/lmd-cuda.deb /root/lmd-vulkan.deb </dev/null'
	step "the GPU binaries are in /usr/lib/lmd/gpu, where node-llama-cpp resolves them; lmd ships none" check_deb_gpu_files
	step "lmd.service is enabled and active; the API answers" wait_api
	step "POST /api/generate is served on the CPU" check_generate
	step "/api/ps: the demo model, nothing in VRAM" check_cpu_ps
	step "the journal: backend cpu, a warning with the reason for each GPU package" check_gpu_fallback
	newversion="$version+it1"
	newdeb=$WORK/lmd-gpu-upgrade.deb
	step "a newer build of lmd ($newversion)" repack "$deb" "$newdeb" "$newversion"
	step "upgrading lmd keeps lmd-cuda and lmd-vulkan; the restarted daemon finds them" check_gpu_upgrade "$newdeb" "$newversion"
	step "container stopped and removed" teardown gpu
	rm -f "$newdeb"
	echo "1..$N"
}

rpm_owner() { rpm --root "$WORK/$NAME/merged" --dbpath /var/lib/rpm -qf "$1"; }

# The rpms, without booting: installed into a fresh root together, lmd reinstalled (the GPU
# packages' files stay), lmd not erasable while a GPU package needs it.
scenario_gpu_rpm() {
	local rpm=$1 cuda=$2 vulkan=$3 root
	echo "TAP version 14"
	echo "# gpu-rpm scenario: $(basename "$rpm") $(basename "$cuda") $(basename "$vulkan")"
	step "rpm -qp --provides/--requires: the GPU packages need the lmd with their node-llama-cpp" check_rpm_gpu_deps "$rpm" "$cuda" "$vulkan"
	step "Debian 12 root (mmdebstrap)" base_root
	step "rpm --root installs lmd, then lmd-cuda and lmd-vulkan (their lmd requirement met) into a fresh root" eval 'make_root gpu-rpm && rpm_gpu_install "$rpm" "$cuda" "$vulkan"'
	step "booted it under systemd-nspawn" boot
	step "the GPU binaries are in /usr/lib/lmd/gpu, where node-llama-cpp resolves them" check_gpu_files rpm_owner
	step "rpm -U --replacepkgs of lmd keeps the GPU packages' files" eval 'rpm --root "$WORK/$NAME/merged" --dbpath /var/lib/rpm --nodeps -U --replacepkgs "$rpm" && check_gpu_files rpm_owner'
	step "rpm -e lmd is refused while lmd-cuda needs it" check_rpm_erase_order
	step "container stopped and removed" teardown gpu-rpm
	echo "1..$N"
}

# Dependencies on the base system (glibc, /bin/sh) are Debian packages here, unknown to rpm's
# database: rpm's own check must then name only those, never lmd(node-llama-cpp).
rpm_gpu_install() {
	local root=$WORK/$NAME/merged out
	rpm --root "$root" --dbpath /var/lib/rpm --initdb || return 1
	out=$(rpm --root "$root" --dbpath /var/lib/rpm -i --test "$2" "$3" 2>&1) && fail "installed without lmd: $out" && return 1
	grep -q 'lmd(node-llama-cpp) = .* is needed by lmd-cuda' <<<"$out" || fail "without lmd, rpm does not ask for it: $out" || return 1
	echo "without lmd: $(grep -c 'is needed' <<<"$out") unmet, lmd(node-llama-cpp) among them"
	rpm --root "$root" --dbpath /var/lib/rpm --nodeps -i "$1" || return 1
	out=$(rpm --root "$root" --dbpath /var/lib/rpm -i --test "$2" "$3" 2>&1)
	if grep -F 'lmd(node-llama-cpp)' <<<"$out"; then fail "lmd is installed, yet rpm asks for it"; return 1; fi
	rpm --root "$root" --dbpath /var/lib/rpm --nodeps -i "$2" "$3"
}

check_rpm_gpu_deps() {
	local llama provides
	provides=$(rpm -qp --provides "$1") || return 1
	llama=$(sed -n 's/^lmd(node-llama-cpp) = //p' <<<"$provides")
	[ -n "$llama" ] || fail "lmd provides no lmd(node-llama-cpp): $provides" || return 1
	echo "lmd provides lmd(node-llama-cpp) = $llama"
	rpm -qp --requires "$2" | grep -qx "lmd(node-llama-cpp) = $llama" && rpm -qp --requires "$3" | grep -qx "lmd(node-llama-cpp) = $llama" ||
		fail "a GPU package does not require lmd(node-llama-cpp) = $llama" || return 1
	if rpm -qpl "$1" | grep -E '@node-llama-cpp/linux-(x64-(cuda|vulkan)|arm)'; then fail "the lmd rpm ships GPU or arm binaries"; return 1; fi
	echo "lmd ships no GPU binaries"
}

check_rpm_erase_order() {
	local out
	if out=$(rpm --root "$WORK/$NAME/merged" --dbpath /var/lib/rpm -e --test lmd 2>&1); then fail "rpm -e lmd would succeed: $out"; return 1; fi
	echo "$out"
	grep -q 'needed by.*lmd-cuda' <<<"$out" || fail "not refused for lmd-cuda"
}

# --- systemd integration: readiness, status, reload, journal fields and priorities, watchdog ------
POLICY=/etc/lmd/models.yaml

systemd_steps() {
	step "systemctl start returns once /api/version answers (Type=notify, READY=1)" check_ready
	step "with a preloaded model, systemctl restart returns once it is in /api/ps; a failed preload is an error" check_preload
	step "systemctl status shows the daemon's STATUS= line" check_status
	step "lmd doctor as the service's user, with its configuration: exit 0, the unit running" check_doctor
	step "systemctl reload applies a changed policy file and log level, same PID" check_reload
	step "an invalid policy file: reload fails, old policy kept, an error at priority 3" check_reload_invalid
	step "journalctl LMD_MODEL=demo -o json: the request's entry with its fields; nothing at -p err for it" check_request_fields
	step "journalctl -p err: a broken model's load failure" check_broken_model
	step "SIGSTOP: the watchdog kills and systemd restarts lmd; the journal says watchdog" check_watchdog
	step "the test's policy file, log level and drop-in removed" restore_config
}

restore_config() {
	cx sed -i '/^SERVICE_MODELS_CONFIG=/d;/^SERVICE_LOG_LEVEL=/d' /etc/lmd/lmd.env &&
		cx rm -f "$POLICY" /etc/systemd/system/lmd.service.d/watchdog.conf && cx systemctl daemon-reload &&
		cx systemctl restart lmd.service && check_generate # a model loaded again, for the stop check
}

# One request, right after systemctl returns: no polling (Type=exec returned before the port answered).
check_ready() {
	cx systemctl stop lmd.service || return 1
	cx systemctl start lmd.service || return 1
	api "http://127.0.0.1:$PORT/api/version" || fail "systemctl start returned before the API answered"
}

ps_models() { api "http://127.0.0.1:$PORT/api/ps" | node -e 'let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>console.log(JSON.parse(s).models.map((m)=>m.name+" "+m.expires_at).join("\n")))'; }

check_preload() {
	# A preload that fails (no such model) is logged at error priority and does not hold the start back.
	cx sh -c "printf 'models:\n  nothere:\n    preload: true\n  demo:\n    preload: true\n    keep_alive: 10m\n' >$POLICY && echo SERVICE_MODELS_CONFIG=$POLICY >>/etc/lmd/lmd.env" || return 1
	cx systemctl restart lmd.service || return 1
	local ps
	ps=$(ps_models) || return 1
	echo "$ps"
	grep -q '^demo:latest ' <<<"$ps" || fail "demo is not in /api/ps right after systemctl restart" || return 1
	journal_has '{"MESSAGE":"preload failed","PRIORITY":3,"LMD_MODEL":"nothere"}'
}

check_status() {
	local out
	out=$(cx systemctl status --no-pager lmd.service)
	echo "$out" | head -n 8
	grep -Eq 'Status: "1 model loaded, 0 requests running, 0 queued' <<<"$out" || fail "no STATUS= line in systemctl status"
}

check_doctor() {
	local out
	out=$(cx runuser -u lmd -- sh -c 'set -a; . /etc/lmd/lmd.env; SERVICE_MODELS=${SERVICE_MODELS:-/var/lib/lmd/models} lmd doctor') || { echo "$out"; fail "lmd doctor exited non-zero"; return 1; }
	echo "$out"
	grep -q '^address: http://127.0.0.1:11434 is served by lmd ' <<<"$out" && grep -q '^unit: lmd.service active (running)' <<<"$out" ||
		fail "lmd doctor did not see the daemon or its unit"
}

# A year from now, as /api/ps's expires_at compares (ISO strings sort by time).
year_from_now() { date -u -d '+1 year' +%Y-%m-%dT%H:%M:%S; }

check_reload() {
	local before after ps
	before=$(cx systemctl show -P MainPID lmd.service)
	cx sh -c "printf 'models:\n  demo:\n    preload: true\n    keep_alive: -1\n' >$POLICY && echo SERVICE_LOG_LEVEL=debug >>/etc/lmd/lmd.env" || return 1
	cx systemctl reload lmd.service || return 1
	ps=$(ps_models) || return 1
	echo "$ps"
	[[ "$(awk '/^demo:latest /{print $2}' <<<"$ps")" > "$(year_from_now)" ]] || fail "keep_alive -1 is not in force after the reload" || return 1
	after=$(cx systemctl show -P MainPID lmd.service)
	[ "$before" = "$after" ] || fail "MainPID changed: $before -> $after" || return 1
	echo "MainPID $after"
	journal_has '{"MESSAGE":"log level changed","LMD_TO":"debug"}' && journal_has '{"MESSAGE":"policy file reloaded"}'
}

check_reload_invalid() {
	local before after ps
	before=$(cx systemctl show -P MainPID lmd.service)
	cx sh -c "printf 'models:\n  demo:\n    keep_alive: 5m\n    num_parallel: many\n' >$POLICY" || return 1
	if cx systemctl reload lmd.service; then fail "systemctl reload succeeded with an invalid policy file"; return 1; fi
	ps=$(ps_models) || return 1
	[[ "$(awk '/^demo:latest /{print $2}' <<<"$ps")" > "$(year_from_now)" ]] || fail "the old policy (keep_alive -1) was not kept" || return 1
	after=$(cx systemctl show -P MainPID lmd.service)
	[ "$before" = "$after" ] && [ "$(cx systemctl is-active lmd.service)" = active ] || fail "the daemon did not stay up" || return 1
	journal_has '{"MESSAGE":"policy file not reloaded","PRIORITY":3}' || return 1
	cx journalctl -u lmd.service -p err --no-pager | tail -n 3
	cx sh -c "printf 'models:\n  demo:\n    preload: true\n' >$POLICY" # valid again for the restarts below
}

check_request_fields() {
	local body out
	body=$(api -H 'x-request-id: healthy-1' -d '{"model":"demo","prompt":"hi","stream":false,"options":{"num_predict":4}}' "http://127.0.0.1:$PORT/api/generate") || return 1
	journal_has '{"MESSAGE":"request: POST /api/generate 200","LMD_MODEL":"demo","LMD_REQUEST_ID":"healthy-1","LMD_STATUS":"200","PRIORITY":"6"}' || return 1
	out=$(cx journalctl -u lmd.service LMD_MODEL=demo LMD_REQUEST_ID=healthy-1 -o json --no-pager)
	echo "$out" | tail -n 1 | cut -c1-800
	node -e 'const e = JSON.parse(process.argv[1].trim().split("\n").pop()); if (!(Number(e.LMD_DURATION_MS) >= 0) || e.LMD_PATH !== "/api/generate") process.exit(1)' "$out" ||
		fail "the request's entry lacks LMD_DURATION_MS or LMD_PATH" || return 1
	if cx journalctl -u lmd.service -p err -o json --no-pager | grep -q '"LMD_REQUEST_ID":"healthy-1"'; then fail "a healthy request logged at error priority"; return 1; fi
}

# A model whose GGUF names an architecture llama.cpp does not know (the demo's file, one byte
# changed): /api/create accepts it, its load fails; the failure is in `journalctl -p err`.
check_broken_model() {
	cx sh -c 'cd /var/lib/lmd/models/blobs && f=$(ls -S sha256-* | head -n 1) && perl -0777 -pe "s/(general\.architecture.{12})llama/\$1llamx/s" "$f" >/tmp/broken.gguf' || return 1
	local digest code
	digest=sha256:$(cx sha256sum /tmp/broken.gguf | cut -d" " -f1)
	api -o /dev/null --data-binary @/tmp/broken.gguf "http://127.0.0.1:$PORT/api/blobs/$digest" || return 1
	api -o /dev/null -d "{\"model\":\"broken\",\"files\":{\"broken.gguf\":\"$digest\"},\"stream\":false}" "http://127.0.0.1:$PORT/api/create" || return 1
	code=$(cx curl -sS -o /dev/null -w '%{http_code}' -H 'x-request-id: broken-1' -d '{"model":"broken","prompt":"hi","stream":false}' "http://127.0.0.1:$PORT/api/generate")
	echo "generate: $code"
	[ "$code" = 500 ] || fail "expected the load to fail (500)" || return 1
	local i err
	for i in $(seq 1 20); do
		err=$(cx journalctl -u lmd.service -p err -o json --no-pager)
		grep -q '"LMD_REQUEST_ID":"broken-1"' <<<"$err" && break
		sleep 0.25
	done
	cx journalctl -u lmd.service -p err --no-pager | tail -n 3
	grep -q '"LMD_REQUEST_ID":"broken-1"' <<<"$err" || fail "the broken model's failure is not in journalctl -p err"
}

# WatchdogSec=3s for this test (a drop-in), then SIGSTOP: systemd must kill and restart within 3s + margin.
check_watchdog() {
	local main restarts i
	# Nothing preloaded: each restart is quick.
	cx sh -c "printf 'models: {}\n' >$POLICY" || return 1
	cx sh -c 'mkdir -p /etc/systemd/system/lmd.service.d && printf "[Service]\nWatchdogSec=3s\n" >/etc/systemd/system/lmd.service.d/watchdog.conf' || return 1
	cx systemctl daemon-reload && cx systemctl restart lmd.service || return 1
	main=$(cx systemctl show -P MainPID lmd.service)
	restarts=$(cx systemctl show -P NRestarts lmd.service)
	cx kill -STOP "$main" || return 1
	for i in $(seq 1 60); do # 3s + up to 27s for the kill, RestartSec=2s and a new start
		[ "$(cx systemctl show -P NRestarts lmd.service)" -gt "$restarts" ] && [ "$(cx systemctl is-active lmd.service)" = active ] && break
		sleep 0.5
	done
	echo "restarted $((i / 2))s after SIGSTOP; MainPID $main -> $(cx systemctl show -P MainPID lmd.service)"
	[ "$(cx systemctl show -P NRestarts lmd.service)" -gt "$restarts" ] || fail "not restarted" || return 1
	cx journalctl -u lmd.service --no-pager | grep -i watchdog | tail -n 3
	cx journalctl -u lmd.service --no-pager | grep -q 'Watchdog timeout' || fail "the journal does not say watchdog" || return 1
	api "http://127.0.0.1:$PORT/api/version"
}

# --- scenarios -----------------------------------------------------------------------------------
deb_version() { dpkg-deb -f "$1" Version; }

scenario_deb() {
	local deb=$1 version newdeb newversion
	[ -f "$deb" ] || { echo "Bail out! no such package: $deb"; exit 1; }
	version=$(deb_version "$deb")
	echo "TAP version 14"
	echo "# deb scenario: $deb ($version)"
	step "Debian 12 root (mmdebstrap)" base_root
	step "booted a fresh container under systemd-nspawn" eval 'make_root deb && boot'
	step "dpkg -i installs the package" eval 'cp "$deb" "$WORK/$NAME/merged/root/lmd.deb" && cx dpkg -i /root/lmd.deb </dev/null'
	step "systemd-analyze verify prints nothing for the installed units" check_verify
	step "lmd.service is enabled and active; the API answers" wait_api
	step "GET /api/version reports $version" check_version "$version"
	step "POST /api/generate with the demo model" check_generate
	step "journalctl -u lmd shows the daemon's entries with their fields, the runner with its threadpool library" check_journal "$version"
	systemd_steps
	step "systemctl stop: SIGTERM to the main PID, models unloaded, Result=success" check_stop
	step "a rotating log file under /var/log/lmd" check_logfile
	newversion="$version+it1"
	newdeb=$WORK/lmd-upgrade.deb
	step "a newer build ($newversion)" repack "$deb" "$newdeb" "$newversion"
	step "upgrade keeps /etc/lmd/lmd.env edits and the models, and restarts" check_upgrade "$newdeb" "$newversion"
	step "dpkg --purge removes state (models, saved prefixes), logs and configuration" check_purge
	step "policy-rc.d is respected: installed and enabled, not started" check_policy_rc_d
	step "container stopped and removed" teardown deb
	rm -f "$newdeb"
	echo "1..$N"
}

scenario_rpm() {
	local rpm=$1 version list scripts
	[ -f "$rpm" ] || { echo "Bail out! no such package: $rpm"; exit 1; }
	version=$(rpm -qp --qf '%{VERSION}' "$rpm" 2>/dev/null)
	echo "TAP version 14"
	echo "# rpm scenario: $rpm ($version)"
	step "rpm -qpl lists the daemon, runtime, units and configuration, no GPU or arm binaries" check_rpm_list "$rpm"
	step "rpm -qp --scripts creates the user and enables the unit; -qpc lists the env file" check_rpm_scripts "$rpm"
	step "Debian 12 root (mmdebstrap)" base_root
	step "rpm --root installs into a fresh root" eval 'make_root rpm && rpm_root_install "$rpm"'
	step "booted it under systemd-nspawn" boot
	step "lmd.service is enabled and active; the API answers" wait_api
	step "GET /api/version reports $version" check_version "$version"
	step "POST /api/generate with the demo model" check_generate
	step "systemctl stop: SIGTERM to the main PID, models unloaded, Result=success" check_stop
	step "container stopped and removed" teardown rpm
	echo "1..$N"
}

check_rpm_list() {
	local list p
	list=$(rpm -qpl "$1") || return 1
	for p in /usr/bin/lmd /usr/lib/lmd/bin/node /usr/lib/lmd/dist/src/main.js /usr/lib/lmd/package.json \
		/usr/lib/lmd/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node /usr/lib/lmd/dist/native/lmd-threadpool.so /usr/lib/lmd/dist/native/lmd-systemd.node \
		/usr/lib/systemd/system/lmd.service /usr/lib/sysusers.d/lmd.conf /usr/lib/tmpfiles.d/lmd.conf \
		/etc/lmd/lmd.env /usr/share/doc/lmd/copyright /usr/share/man/man1/lmd.1.gz; do
		grep -qx -- "$p" <<<"$list" || fail "missing $p" || return 1
	done
	if printf '%s\n' "$list" | grep -E '@node-llama-cpp/linux-(x64-(cuda|vulkan)|arm)'; then fail "GPU or arm binaries packaged"; return 1; fi
	echo "$(printf '%s\n' "$list" | wc -l) files"
}

check_rpm_scripts() {
	local scripts conf
	scripts=$(rpm -qp --scripts "$1") || return 1
	echo "$scripts"
	grep -q '^postinstall scriptlet' <<<"$scripts" && grep -q 'systemd-sysusers lmd.conf' <<<"$scripts" &&
		grep -q 'enable lmd.service' <<<"$scripts" && grep -q '^preuninstall scriptlet' <<<"$scripts" ||
		fail "scriptlets incomplete" || return 1
	conf=$(rpm -qpc "$1") && grep -qx /etc/lmd/lmd.env <<<"$conf" || fail "/etc/lmd/lmd.env is not a config file"
}

rpm_root_install() {
	local root=$WORK/$NAME/merged
	# Dependencies (glibc, systemd...) are Debian packages here, unknown to rpm's database.
	rpm --root "$root" --dbpath /var/lib/rpm --initdb || return 1
	rpm --root "$root" --dbpath /var/lib/rpm --nodeps -i "$1" || return 1
	[ -L "$root/etc/systemd/system/multi-user.target.wants/lmd.service" ] || fail "the scriptlet did not enable lmd.service" || return 1
	grep -q '^lmd:' "$root/etc/passwd" || fail "the scriptlet did not create the lmd user"
}

# repack IN OUT VERSION [broken]: IN with a new version (and package.json version), or with a unit
# that cannot work (network families removed, as an over-tightened hardening would do).
repack() {
	local in=$1 out=$2 version=$3 mode=${4:-} tmp
	tmp=$(mktemp -d "$WORK/repack.XXXXXX")
	dpkg-deb -R "$in" "$tmp/p" || return 1
	sed -i "s/^Version: .*/Version: $version/" "$tmp/p/DEBIAN/control"
	node -e 'const fs = require("fs"), f = process.argv[1], p = JSON.parse(fs.readFileSync(f)); p.version = process.argv[2]; fs.writeFileSync(f, JSON.stringify(p, null, 2) + "\n")' \
		"$tmp/p/usr/lib/lmd/package.json" "$version"
	if [ "$mode" = broken ]; then
		sed -i 's/^RestrictAddressFamilies=.*/RestrictAddressFamilies=AF_UNIX/' "$tmp/p/usr/lib/systemd/system/lmd.service"
	fi
	(cd "$tmp/p" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$tmp/p/DEBIAN/md5sums"
	dpkg-deb --root-owner-group -Zgzip -z1 --build "$tmp/p" "$out" >/dev/null || return 1
	rm -rf "$tmp"
}

mkdir -p "$WORK"
case ${1:-} in
	deb) scenario_deb "$2" ;;
	rpm) scenario_rpm "$2" ;;
	gpu) scenario_gpu "$2" "$3" "$4" ;;
	gpu-rpm) scenario_gpu_rpm "$2" "$3" "$4" ;;
	repack) repack "$2" "$3" "$4" "${5:-}" ;;
	cleanup) cleanup ;;
	*) echo "usage: $0 deb PACKAGE.deb | rpm PACKAGE.rpm | gpu LMD.deb CUDA.deb VULKAN.deb | gpu-rpm LMD.rpm CUDA.rpm VULKAN.rpm | repack IN OUT VERSION [broken] | cleanup" >&2; exit 2 ;;
esac
