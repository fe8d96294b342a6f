#!/usr/bin/env bash
# The README's pictures, made by the program itself (`attnscope --screenshot`), so that they are regenerated,
# never drawn: the worked example, a decoder with its predictions, the logit lens, and an 8192-token text.
# Run from the repository root after a build (scripts/run.sh builds); needs xvfb-run and the models that
# scripts/setup.sh installs (SmolLM2). Writes docs/images/*.png at 1280×800, each checked to stay under 300 KB
# (the one kind of generated file the repository keeps).
#
# usage: scripts/make_readme_images.sh [BUILD_DIR]   (default: build)
set -euo pipefail
build=${1:-build}
exe="$build/bin/attnscope"
out=docs/images
smollm="$build/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -x "$exe" ] || { echo "make_readme_images.sh: $exe not built (run scripts/run.sh first)" >&2; exit 1; }
mkdir -p "$out"
shot() {  # NAME FRAMES ARGS...: one screenshot of the window at 1280×800
    local name=$1 frames=$2
    shift 2
    xvfb-run -a -s "-screen 0 1280x800x24" "$exe" "$@" --size 1280x800 --no-autosave --no-restore \
        --frames "$frames" --screenshot "$out/$name.png"
}
shot worked_example 5 assets/presets/seed000_worked_example.json
if [ -f "$smollm" ]; then
    text="The capital of France is Paris. The capital of Italy is"
    # A decoder runs on its worker: enough frames for the forward and its predictions to arrive.
    shot decoder_predictions 240 --model "$smollm" --model-text "$text"
    shot logit_lens 240 --model "$smollm" --model-text "$text" --why lens
    # 8000 tokens (SmolLM2's context is 8192): a lazy run (docs/model.md), its grid pooled to a pixel a block; the
    # text is generated. This one takes minutes on a small machine (150 s on a loaded 2-core one).
    long=$(mktemp)
    python3 -c "import sys; w='the quick brown fox jumps over the lazy dog and then it rests'.split(); sys.stdout.write(' '.join(w[i % len(w)] for i in range(8000)))" > "$long"
    shot long_text_8192 2400 --model "$smollm" --model-text-file "$long"
    rm -f "$long"
else
    echo "make_readme_images.sh: $smollm missing: the decoder pictures are left as they are" >&2
fi
for f in "$out"/*.png; do
    size=$(stat -c %s "$f")
    if [ "$size" -gt 300000 ]; then
        echo "make_readme_images.sh: $f is $size bytes, over 300 KB" >&2
        exit 1
    fi
done
ls -l "$out"
