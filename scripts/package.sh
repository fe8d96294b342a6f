#!/usr/bin/env bash
# Builds the Debian package of attnscope into build-pkg/ (CPack, issue 19) and checks it: the files it holds,
# its declared dependencies, and the program unpacked into a scratch root (dpkg-deb -x) run from there.
#   scripts/package.sh            then: sudo apt install ./build-pkg/attnscope_VERSION_ARCH.deb
# A separate build folder, so the package is built for any x86-64 machine: no -march=native (build/ has it),
# no CUDA (the package would need the CUDA runtime on every machine). The models scripts/setup.sh downloaded
# into build/models go in too (share/attnscope/models); without them the package has the program alone.
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# dpkg-shlibdeps (dpkg-dev) declares the libraries the program links; the set-up installs it with the rest.
attnscope_install_packages
attnscope_venv      # glad2 generates the OpenGL loader at build time
attnscope_model
attnscope_decoder_model

pkg="$ATTNSCOPE_ROOT/build-pkg"
if [ ! -f "$pkg/build.ninja" ]; then
  attnscope_log "configuring build-pkg/ (Release, portable: no -march=native, no CUDA, no tests)"
  cmake -S "$ATTNSCOPE_ROOT" -B "$pkg" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DATTNSCOPE_CUDA=OFF -DATTNSCOPE_NATIVE=OFF -DATTNSCOPE_BUILD_TESTS=OFF \
    -DATTNSCOPE_PYTHON="$ATTNSCOPE_BUILD/venv/bin/python3" \
    -DATTNSCOPE_MODELS_DIR="$ATTNSCOPE_BUILD/models" >&2
fi
cmake --build "$pkg" -j "$(nproc 2>/dev/null || echo 2)" --target attnscope >&2
rm -f "$pkg"/attnscope_*.deb
(cd "$pkg" && cpack -G DEB >&2)
deb="$(ls "$pkg"/attnscope_*.deb)"

# Self-check: what a user's dpkg would unpack, run from there with nothing of this checkout in reach.
version="$(dpkg-deb -f "$deb" Version)"
depends="$(dpkg-deb -f "$deb" Depends)"
attnscope_log "package $(basename "$deb"): $(du -h "$deb" | cut -f1); Depends: $depends"
case "$depends" in *libc6*) ;; *) attnscope_log "Depends lacks libc6: dpkg-shlibdeps did not run"; exit 1 ;; esac
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
run() { (cd / && env -i PATH=/usr/bin:/bin HOME="$root" "$root/usr/bin/attnscope" "$@"); }
[ "$(run --version)" = "attnscope $version" ] || { attnscope_log "the unpacked attnscope --version is not $version"; exit 1; }
help="$(run --help)"  # captured first: grep -q stopping early would fail the pipe under pipefail
grep -qF "$root/usr/share/attnscope/assets/presets/seed000_worked_example.json" <<<"$help" \
  || { attnscope_log "the unpacked attnscope does not find its presets under $root/usr/share/attnscope"; exit 1; }
run render "$root/usr/share/attnscope/assets/presets/seed000_worked_example.json" -o "$root/check.png" >&2
[ -s "$root/check.png" ] || { attnscope_log "the unpacked attnscope render wrote no PNG"; exit 1; }
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate "$root/usr/share/applications/attnscope.desktop"
fi
attnscope_log "ok: the unpacked package runs; install it with: sudo apt install $deb"
echo "$deb"
