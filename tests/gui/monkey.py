"""GUI monkey test: random clicks, drags, wheel turns, held keys, typed text and clipboard round trips on the
real window under Xvfb, meant for the ASan + UBSan build. Fails when the window exits before it is told to,
when it does not close cleanly on SIGTERM, or when its stderr holds a sanitizer report.

Seeded: the same --seed replays the same event list (written to WORK/events.txt, one event a line, so a
failure can also be cut down by hand). Random clipboard text goes through the app itself: text typed into a
cell editor is selected and copied (Ctrl+A, Ctrl+C), then pasted elsewhere (Ctrl+V); xdotool cannot set the
X clipboard, and no clipboard tool is part of the dependencies.

  monkey.py --exe build-asan/bin/attnscope --work DIR --session S.json [--events 1000] [--seed 13]
  monkey.py --exe ... --work DIR --model FILE.gguf --model-text TEXT [--events 1000]   (model mode, issue 36)

In model mode a fifth of the events aim at the decoder's own controls, found by name in the window's test-hook
layout when the event runs (the why-tabs, Generate, the ablation crosses, the predictions, the tokens, the text
field): the seed picks the name's prefix and which of the matching places, so a replay aims the same way.

Each event is one or a few xdotool calls (process start-up dominates otherwise); keys are held for 50 ms,
about a frame of the ASan build under llvmpipe (ImGui 1.86 polls key state once a frame).
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

W, H = 1280, 800
# Never Ctrl+Q / Alt+F4: the window has no quit key, and Xvfb has no window manager to close it.
KEYS = ["Left", "Right", "Up", "Down", "Tab", "shift+Tab", "Return", "Escape", "BackSpace", "Delete", "Home", "End",
        "ctrl+z", "ctrl+shift+z", "ctrl+y", "ctrl+c", "ctrl+v", "ctrl+a", "ctrl+e", "ctrl+o", "ctrl+s",
        "minus", "period", "0", "1", "5", "9", "e", "space"]
TEXT_CHARS = "0123456789.-+eE ,;[]()\ttensor inf nan x"
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer",
                   "AddressSanitizer:DEADLYSIGNAL")


def random_text(rng):
    n = rng.randint(1, 16)
    return "".join(rng.choice(TEXT_CHARS) for _ in range(n))


# Model mode: the places "aim" events click, by name prefix in the test hooks' layout (app/panels/*.cpp).
AIM_PREFIXES = ["why/tab/", "model/generate", "model/ablate/", "model/next/", "model/token/", "model/text", "why/map/",
                "model/back", "headsgrid/", "heatmap/"]


def make_events(rng, count, aim_weight=0):
    """A list of events; each event is a list of xdotool calls (argument lists). `type` takes every argument
    after it as text, so it always ends its call, and "--" keeps text starting with "-" from being an option."""
    events = []
    for _ in range(count):
        kind = rng.choices(["click", "dclick", "drag", "wheel", "key", "type", "copy_paste", "aim"],
                           weights=[30, 6, 12, 10, 32, 5, 5, aim_weight])[0]
        x, y = rng.randrange(W), rng.randrange(H)
        if kind == "click":
            button = rng.choice([1, 1, 1, 3])
            events.append([["mousemove", x, y, "sleep", "0.03", "mousedown", button, "sleep", "0.05", "mouseup", button]])
        elif kind == "dclick":
            events.append([["mousemove", x, y, "sleep", "0.03", "click", "--repeat", "2", "--delay", "50", "1"]])
        elif kind == "drag":
            x2, y2 = rng.randrange(W), rng.randrange(H)
            steps = [["mousemove", x + (x2 - x) * k // 3, y + (y2 - y) * k // 3, "sleep", "0.03"] for k in range(1, 4)]
            events.append([["mousemove", x, y, "sleep", "0.03", "mousedown", "1", "sleep", "0.05"] +
                           [a for st in steps for a in st] + ["mouseup", "1"]])
        elif kind == "wheel":
            events.append([["mousemove", x, y, "sleep", "0.03", "click", "--repeat", rng.randint(1, 4), "--delay", "40",
                            rng.choice([4, 5, 6, 7])]])
        elif kind == "aim":
            # Resolved when it runs (aim_at): ["aim", prefix, which] clicks the which-th place named prefix…, then
            # now and then types a few characters there (the text field, a token).
            events.append([["aim", rng.choice(AIM_PREFIXES), rng.randrange(1000)]] +
                          ([["type", "--delay", "10", "--", random_text(rng)]] if rng.random() < 0.2 else []))
        elif kind == "key":
            k = rng.choice(KEYS)
            events.append([["keydown", k, "sleep", "0.05", "keyup", k]])
        elif kind == "type":
            events.append([["type", "--delay", "10", "--", random_text(rng)]])
        else:  # a cell editor's text onto the clipboard, then pasted somewhere else
            x2, y2 = rng.randrange(W), rng.randrange(H)
            events.append([["mousemove", x, y, "sleep", "0.03", "click", "--repeat", "2", "--delay", "50", "1", "sleep", "0.05"],
                           ["type", "--delay", "10", "--", random_text(rng)],
                           ["keydown", "ctrl+a", "sleep", "0.05", "keyup", "ctrl+a",
                            "keydown", "ctrl+c", "sleep", "0.05", "keyup", "ctrl+c",
                            "keydown", "Escape", "sleep", "0.05", "keyup", "Escape",
                            "mousemove", x2, y2, "sleep", "0.03", "click", "1", "sleep", "0.05",
                            "keydown", "ctrl+v", "sleep", "0.05", "keyup", "ctrl+v"]])
    return events


def aim_at(hooks, prefix, which):
    """The xdotool call that clicks the centre of the which-th (modulo) place whose name starts with prefix in the
    window's current layout (test hooks), or None when there is none."""
    try:
        with open(os.path.join(hooks, "layout.json")) as f:
            rects = json.load(f).get("rects", {})
    except (OSError, ValueError):
        return None  # being rewritten: skip this one
    names = sorted(n for n in rects if n.startswith(prefix))
    if not names:
        return None
    x0, y0, x1, y1 = rects[names[which % len(names)]]
    x, y = int((x0 + x1) / 2), int((y0 + y1) / 2)
    if not (0 <= x < W and 0 <= y < H):
        return None
    return ["mousemove", x, y, "sleep", "0.03", "mousedown", "1", "sleep", "0.05", "mouseup", "1"]


def show(event):
    return " ; ".join(" ".join(map(str, call)) for call in event)


def sanitizer_report(path):
    with open(path, errors="replace") as f:
        text = f.read()
    for mark in SANITIZER_MARKS:
        at = text.find(mark)
        if at >= 0:
            return text[max(0, at - 200):at + 4000]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--session")
    ap.add_argument("--model", help="model mode: a decoder (.gguf) opened on --model-text instead of a session")
    ap.add_argument("--model-text", default="The capital of France is Paris. The capital of Italy is")
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("MONKEY_SEED", "13")))
    a = ap.parse_args()
    if not a.session and not a.model:
        ap.error("one of --session and --model is required")

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    hooks = os.path.join(a.work, "hooks")
    os.makedirs(hooks)
    # The window works in a folder of its own: Ctrl+S saves the copy, the Export dialog writes here.
    if a.model:
        opened = ["--model", os.path.abspath(a.model), "--model-text", a.model_text]
    else:
        session = os.path.join(a.work, "session.json")
        shutil.copy(a.session, session)
        opened = [session]
    rng = random.Random(a.seed)
    events = make_events(rng, a.events, aim_weight=25 if a.model else 0)
    with open(os.path.join(a.work, "events.txt"), "w") as f:
        f.write("# seed %d: one event a line, its xdotool calls separated by ' ; '\n" % a.seed)
        for e in events:
            f.write(show(e) + "\n")

    stderr_path = os.path.join(a.work, "stderr.txt")
    env = dict(os.environ)
    # Leaks at exit come from Mesa and fontconfig (see tests/export/lsan.supp); memory errors and UB are what
    # this test is for. UBSan stops at the first finding (the build uses -fno-sanitize-recover too).
    env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0:" + env.get("ASAN_OPTIONS", "")
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1:" + env.get("UBSAN_OPTIONS", "")
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen([os.path.abspath(a.exe), *opened, "--size", "%dx%d" % (W, H), "--no-autosave", "--no-restore",
                                 "--test-hooks", hooks], cwd=a.work, stderr=err, env=env)

    def fail(msg):
        print("FAIL (seed %d): %s" % (a.seed, msg), file=sys.stderr)
        report = sanitizer_report(stderr_path)
        if report:
            print(report, file=sys.stderr)
        else:
            # No sanitizer report: an abort (assertion, uncaught exception) says why in its last lines.
            with open(stderr_path, errors="replace") as f:
                tail = f.read()[-3000:]
            print("the window's stderr ends with:\n" + tail, file=sys.stderr)
        print("replay: %s --seed %d (events: %s)" % (" ".join(sys.argv[:1]), a.seed, os.path.join(a.work, "events.txt")),
              file=sys.stderr)
        if proc.poll() is None:
            proc.kill()
        sys.exit(1)

    # The first frame, then the X window (no window manager: give it the focus ourselves).
    t0 = time.time()
    while not os.path.exists(os.path.join(hooks, "layout.json")):
        if proc.poll() is not None:
            fail("the window exited with %s before its first frame" % proc.returncode)
        if time.time() - t0 > 60:
            fail("no first frame within 60 s")
        time.sleep(0.1)
    wid = None
    while not wid:
        out = subprocess.run(["xdotool", "search", "--name", "^attnscope$"], capture_output=True, text=True).stdout.split()
        wid = out[0] if out else None
        if time.time() - t0 > 60:
            fail("no window within 60 s")
        time.sleep(0.1)
    time.sleep(0.5)
    subprocess.run(["xdotool", "windowfocus", "--sync", wid], check=False)

    t1 = time.time()
    for i, e in enumerate(events):
        # Keyboard focus stays on our window (a click cannot move it: there is no window manager).
        for call in e:
            if call[0] == "aim":
                call = aim_at(hooks, call[1], call[2])
                if not call:
                    continue  # nothing of that name on screen now
            r = subprocess.run(["xdotool"] + [str(x) for x in call], capture_output=True, text=True)
            if r.returncode != 0:
                fail("xdotool failed on event %d (%s): %s" % (i, show(e), r.stderr.strip()))
        if proc.poll() is not None:
            fail("the window exited with %s after event %d: %s" % (proc.returncode, i, show(e)))
        if i % 50 == 0 and sanitizer_report(stderr_path):
            fail("sanitizer report after event %d" % i)
    elapsed = time.time() - t1
    time.sleep(0.5)
    if proc.poll() is not None:
        fail("the window exited with %s after the last event" % proc.returncode)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("the window did not close within 60 s of SIGTERM")
    if proc.returncode != 0:
        fail("the window exited with %s on SIGTERM (expected 0)" % proc.returncode)
    if sanitizer_report(stderr_path):
        fail("sanitizer report")
    print("monkey: seed %d, %d events in %.1f s, window closed cleanly, no sanitizer report" % (a.seed, len(events), elapsed))


if __name__ == "__main__":
    main()
