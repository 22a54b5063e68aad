#!/bin/bash
# Builds (or one build's knob settings) measured by turns on one GPU:
# `marrow bench gpu` of each variant in turn, ROUNDS rounds, each run's text
# and JSON kept, then `marrow bench compare` of all the runs.
#
#   scripts/gpu_by_turns.sh OUT ROUNDS LABEL=BINARY[@DEFINES] ... [-- BENCH_GPU_ARGS]
#
#   OUT       a directory for LABEL-rN.txt (the text), LABEL-rN.json (the
#             figures) and compare.md (the table)
#   BINARY    a marrow binary; DEFINES, MARROW_NVRTC_DEFINE for its run
#             (NAME=VALUE,NAME=VALUE: kernels/README.md lists the knobs)
#   e.g.      scripts/gpu_by_turns.sh /tmp/turns 3 head=./marrow \
#               poll0=./marrow@MARROW_WAIT_POLLS_FIRST=0 main=./marrow-main -- --only rates,latency
#
# By turns, not one variant's rounds in a row: the machine's state moves a
# figure by 5-10% over minutes, and turns give each variant the same share
# of it. A binary older than `bench gpu --json-out` runs with `--json`
# instead, and its text is not kept. The table is made by the first
# variant's binary; the exit status is 1 if any run failed.
set -u
if [ $# -lt 3 ]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
out=$1 rounds=$2
shift 2
variants=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    *=*) variants+=("$1") ;;
    *) echo "gpu_by_turns: $1 is not LABEL=BINARY[@DEFINES]" >&2; exit 2 ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift
case $rounds in '' | *[!0-9]* | 0) echo "gpu_by_turns: ROUNDS must be a positive number, not $rounds" >&2; exit 2 ;; esac
mkdir -p "$out" || exit 2
status=0 runs=()
for r in $(seq 1 "$rounds"); do
  for v in "${variants[@]}"; do
    label=${v%%=*} spec=${v#*=}
    bin=${spec%%@*} defines=""
    [ "$spec" != "$bin" ] && defines=${spec#*@}
    base=$out/$label-r$r
    echo "[$(date -u +%T)] round $r $label${defines:+ ($defines)}" >&2
    if "$bin" bench gpu --help 2>/dev/null | grep -q -- --json-out; then
      MARROW_NVRTC_DEFINE=$defines "$bin" bench gpu --json-out "$base.json" "$@" > "$base.txt" 2>&1
    else
      MARROW_NVRTC_DEFINE=$defines "$bin" bench gpu --json "$@" > "$base.json" 2> "$base.txt"
    fi
    rc=$?
    echo "rc=$rc" >> "$base.txt"
    # A failed run's figures (or its error object) stay out of the table.
    if [ $rc -eq 0 ]; then runs+=("$label=$base.json"); else status=1; fi
  done
done
first=${variants[0]#*=}
first=${first%%@*}
if [ ${#runs[@]} -gt 0 ]; then
  "$first" bench compare "${runs[@]}" > "$out/compare.md" || status=1
  cat "$out/compare.md"
fi
exit $status
