#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang under ASan + UBSan into build-fuzz/ and runs each for
# SECONDS (default 60) over its seed corpus in tests/fuzz/corpus/<name>/. New inputs found go to
# build-fuzz/corpus/<name>/ (the seed folders in the repository are not written to); crashes to
# build-fuzz/artifacts/. Exit status 1 on the first fuzzer that finds a crash, a leak, a timeout or an OOM.
#   scripts/fuzz.sh [SECONDS] [NAME...]     e.g. scripts/fuzz.sh 600 session     (names: session npy npz safetensors model_config tokenizer model_safetensors gguf bpe_tokenizer spm_tokenizer decoder_config decoder_gguf synthetic_decoder bundle)
# Environment: FUZZ_JOBS (compile jobs, default 2), FUZZ_NICE (nice level, default 19).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"  # as scripts/setup.sh
seconds="${1:-60}"
shift || true
build="$root/build-fuzz"
cxx="$(command -v clang++-14 || command -v clang++ || true)"
cc="$(command -v clang-14 || command -v clang || true)"
if [ -z "$cxx" ] || [ -z "$cc" ]; then
  echo "fuzz.sh: clang not found; install clang-14 and libclang-rt-14-dev (Debian 12)" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
  # -O1 -g1, as the sanitizer stage of .ci/run: libFuzzer's usual optimisation and line numbers in the stacks, for about
  # 20 % less compile time than RelWithDebInfo's -O2 -g (decoder.cpp: 47 s of CPU against 59 s).
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DATTNSCOPE_FUZZ=ON -DATTNSCOPE_BUILD_TESTS=OFF -DATTNSCOPE_CUDA=OFF >&2
fi
nice -n "${FUZZ_NICE:-19}" cmake --build "$build" -j "${FUZZ_JOBS:-2}" --target fuzzers >&2

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=()
  for f in "$build"/tests/fuzz/fuzz_*; do [ -x "$f" ] && names+=("$(basename "$f" | sed 's/^fuzz_//')"); done
fi
mkdir -p "$build/artifacts"
status=0
for n in "${names[@]}"; do
  exe="$build/tests/fuzz/fuzz_$n"
  seeds="$root/tests/fuzz/corpus/$n"
  work="$build/corpus/$n"
  mkdir -p "$work"
  corpora=("$work" "$seeds")
  if [ "$n" = synthetic_decoder ]; then
    # Its seeds are the tiny models' own config.json files (tests/model/data), copied into the work folder rather
    # than kept twice in the repository.
    for c in "$root"/tests/model/data/tiny_*/config.json; do cp "$c" "$work/$(basename "$(dirname "$c")").json"; done
    seeds="$root/tests/model/data/tiny_*/config.json"
    corpora=("$work")
  fi
  echo "fuzz.sh: fuzz_$n for ${seconds}s (seeds: ${seeds#"$root"/}, new inputs: build-fuzz/corpus/$n)" >&2
  # -rss_limit_mb: the parsers refuse anything that would need more than ~1 GiB; -timeout: no input may take
  # 10 s; halt_on_error: a UBSan finding is a failure. One job, one worker: the machine is shared.
  if ! ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
       nice -n "${FUZZ_NICE:-19}" "$exe" "${corpora[@]}" -max_total_time="$seconds" -rss_limit_mb=3072 -timeout=10 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/${n}-" 2> "$build/fuzz_$n.log"; then
    echo "fuzz.sh: fuzz_$n FAILED (log: build-fuzz/fuzz_$n.log, inputs: build-fuzz/artifacts/${n}-*)" >&2
    tail -40 "$build/fuzz_$n.log" >&2
    status=1
    continue
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs" "$build/fuzz_$n.log" | sed "s/^/fuzz.sh: fuzz_$n: /" >&2 || true
done
exit $status
