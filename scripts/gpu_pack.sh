#!/usr/bin/env bash
# Builds what scripts/gpu_check.sh runs on a machine with an NVIDIA GPU, on this machine (which needs none), and
# packs it: .gpu/attnscope-gpu.tar.xz (about 20 MB) holding the program, the gpu-labelled test programs and every
# shared library they load except glibc's and CUDA's own (the GPU machine brings its driver and CUDA 13's cuBLAS),
# and libEGL (glvnd's loader, which --offscreen opens; the driver's NVIDIA EGL is found through its vendor file).
#
#   scripts/gpu_pack.sh            # build-gpu/ (configured on first use), then the archive
#
# The build is portable on purpose: x86-64-v3 (AVX2 + FMA) instead of -march=native, whose AVX-512 code would stop
# with SIGILL on a host processor without it, and CUDA code for sm_90 alone (H100, H200; the default list builds five
# architectures). build-gpu/ and .gpu/ are git-ignored.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
build="$root/build-gpu"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache \
    -DATTNSCOPE_CUDA=ON -DATTNSCOPE_NATIVE=OFF -DCMAKE_CXX_FLAGS="-march=x86-64-v3" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DATTNSCOPE_PYTHON="$root/build/venv/bin/python3"
fi
# The gpu-labelled tests' programs, as CTest knows them (the first word of each test's command).
mapfile -t tests < <((cd "$build" && ctest -L gpu --show-only=json-v1 2>/dev/null) |
  python3 -c 'import json,os,sys
seen=set()
for t in json.load(sys.stdin).get("tests", []):
    exe=os.path.basename(t["command"][0])
    if exe not in seen: seen.add(exe); print(exe)')
# Before a test program is built CTest lists none of its tests (gtest_discover_tests reads them from the program):
# the gpu-labelled programs are named here (a new one goes here too), built, then listed again.
targets=(attnscope test_parity test_decoder_cuda test_decoder_device test_decoder_device_maps test_device_state test_gl_interop test_flash_attention "${tests[@]}")
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort -u)
nice cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}"
mapfile -t tests < <((cd "$build" && ctest -L gpu --show-only=json-v1) |
  python3 -c 'import json,os,sys
seen=set()
for t in json.load(sys.stdin).get("tests", []):
    exe=os.path.basename(t["command"][0])
    if exe not in seen: seen.add(exe); print(exe)')

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "$build/bin/attnscope" "$stage/bin/"
for t in "${tests[@]}"; do
  f="$(find "$build" -name "$t" -type f -perm -u+x | head -1)"
  [ -n "$f" ] && cp "$f" "$stage/bin/"
done
# Libraries: what ldd resolves for each program, less the C library's own (the GPU machine's glibc is as new or newer)
# and CUDA's (the driver's libcuda, the toolkit's cuBLAS: that machine's own CUDA 13).
{
  for exe in "$stage"/bin/*; do ldd "$exe" | awk '/=> \//{print $3}'; done
  # libEGL is loaded by dlopen for --offscreen (bench --gui on the GPU machine), so ldd does not list it; its
  # libGLdispatch comes with the GL libraries ldd lists. So is libGL.so.1 (with its libGLX): the OpenGL3 backend of
  # Debian's ImGui finds GL's functions through its own loader, which opens libGL.so.1 and asks glXGetProcAddressARB;
  # glvnd's answers with dispatch stubs that call the current context's vendor, the EGL one here, no X display
  # needed. The GPU machines have no libGL.so.1 (the first loan that tried stopped at "Failed to initialize OpenGL
  # loader!").
  for l in libEGL.so.1 libGL.so.1 libGLX.so.0; do ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ {print $NF; exit}'; done
} | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libresolv.so*|libcuda.so*|libcublas*|libcudart*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
{
  echo "built $(date -u +%Y-%m-%dT%H:%MZ) from $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with local changes)')"
  echo "tests: ${tests[*]}"
} >"$stage/BUILD"
mkdir -p "$root/.gpu"
tar -C "$stage" -cJf "$root/.gpu/attnscope-gpu.tar.xz" .
ls -l "$root/.gpu/attnscope-gpu.tar.xz"
