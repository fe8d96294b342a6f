#!/usr/bin/env bash
# Installs the build into a scratch prefix (`cmake --install`, what the .deb holds under /usr) and runs the
# installed program the way a user would: from /, with a bare environment, nothing of the source tree or build
# folder on its paths. Checks --version, --help (which names the presets and model folders the program found:
# they must be the installed ones), a render of an installed preset, a model run when models were installed,
# and the desktop entry and file types with the desktop's own tools when they are present.
# Usage: installed_test.sh BUILD_DIR SCRATCH_DIR VERSION [BUNDLE]   (BUNDLE: an attention bundle to draw)
set -euo pipefail
build="$1" scratch="$2" version="$3" bundle="${4:-}"

fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$scratch"
mkdir -p "$scratch/home"
scratch="$(cd "$scratch" && pwd -P)"  # the program reports canonical paths
prefix="$scratch/prefix"
cmake --install "$build" --prefix "$prefix" >"$scratch/install.log" || { cat "$scratch/install.log" >&2; fail "cmake --install"; }

for f in bin/attnscope share/applications/attnscope.desktop share/icons/hicolor/scalable/apps/attnscope.svg \
         share/mime/packages/attnscope.xml share/attnscope/assets/presets/seed000_worked_example.json \
         share/attnscope/assets/images; do
  [ -e "$prefix/$f" ] || fail "not installed: $prefix/$f"
done

# The installed program, from /, with no variable of this build (ATTNSCOPE_MODEL_DIR, LD_LIBRARY_PATH…).
run() { (cd / && env -i PATH=/usr/bin:/bin HOME="$scratch/home" "$prefix/bin/attnscope" "$@"); }

out="$(run --version)" || fail "attnscope --version exited $?"
[ "$out" = "attnscope $version" ] || fail "attnscope --version printed '$out', expected 'attnscope $version'"

out="$(run --help)" || fail "attnscope --help exited $?"
grep -q "Exit codes" <<<"$out" || fail "attnscope --help has no 'Exit codes' footer"
want="$prefix/share/attnscope/assets/presets/seed000_worked_example.json"
grep -qF "$want" <<<"$out" || fail "attnscope --help does not name the installed presets ($want):
$(grep -i 'seed 000' <<<"$out")"

run render "$prefix/share/attnscope/assets/presets/seed000_worked_example.json" -o "$scratch/out.png" \
  || fail "attnscope render exited $?"
[ "$(head -c 4 "$scratch/out.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "render wrote no PNG at $scratch/out.png"

if [ -n "$bundle" ]; then
  # An attention bundle (docs/bundle.md) copied in as a user's file would be, drawn by the installed program.
  cp "$bundle" "$scratch/user.attn.safetensors"
  run render --bundle "$scratch/user.attn.safetensors" --panel model-view -o "$scratch/bundle.png" \
    || fail "attnscope render --bundle exited $?"
  [ "$(head -c 4 "$scratch/bundle.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "render --bundle wrote no PNG"
fi

if [ -d "$prefix/share/attnscope/models/all-MiniLM-L6-v2" ]; then
  model="$prefix/share/attnscope/models/all-MiniLM-L6-v2"
  out="$(run model --help)" || fail "attnscope model --help exited $?"
  grep -qF "$model" <<<"$out" || fail "attnscope model --help does not name the installed model ($model)"
  run model --text "the cat sat" -o "$scratch/model.json" || fail "attnscope model (installed model) exited $?"
  [ -s "$scratch/model.json" ] || fail "attnscope model wrote nothing"
else
  echo "note: no models in the build folder, so none installed; model run skipped"
fi

# Optional: the desktop's tools (Debian desktop-file-utils, shared-mime-info).
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate "$prefix/share/applications/attnscope.desktop" || fail "desktop-file-validate"
else
  echo "note: desktop-file-validate not found (apt install desktop-file-utils); desktop entry not validated"
fi
if command -v update-mime-database >/dev/null; then
  # Its note that the scratch folder is not on XDG_DATA_DIRS is expected; the log is shown only on failure.
  update-mime-database "$prefix/share/mime" >"$scratch/mime.log" 2>&1 \
    || { cat "$scratch/mime.log" >&2; fail "update-mime-database refused share/mime/packages/attnscope.xml"; }
  for t in x-attnscope-session x-attnscope-bundle; do
    [ -f "$prefix/share/mime/application/$t.xml" ] || fail "update-mime-database did not register application/$t"
  done
fi

rm -rf "$scratch"
echo "ok: installed attnscope $version runs from $prefix"
