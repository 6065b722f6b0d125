#!/usr/bin/env bash
# The compute-sanitizer proof on a CUDA GPU (run from the checkout root; eaglefuzz need not be
# installed: the checkout goes on PYTHONPATH). Needs compute-sanitizer on PATH.
#
# 1. The seeded out-of-bounds read (tests/seeded_bugs/mutants.py, SANITIZER_MUTANTS) changes no
#    output: the plain replay passes (exit 0).
# 2. Under memcheck the same replay reports "invalid memory access" findings, each naming its
#    case file with the sanitizer's first error lines (exit 1).
# 3. The production kernels replay clean under memcheck (exit 0).
# 4. A seeded missing guard (pi_missing_num_reqs_guard: programs past num_reqs read and write) on
#    the corpus case with a padded grid: memcheck reports it (exit 1; without --sanitize the
#    guard bands catch it as a difference).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
BUGS=$(mktemp -d)
CE=corpus/copy_and_expand_eagle_inputs_kernel
FILES=$(ls "$CE"/*.json | head -n "${N_CASES:-4}")
"$PY" tests/seeded_bugs/mutants.py "$BUGS" > /dev/null
BUG="$BUGS/oob_read_copy_expand_unmasked.py"
step() { echo; echo "### $*"; }

step "1. plain replay of the seeded out-of-bounds read (expect exit 0: no output changes)"
time "$PY" -m eaglefuzz.harness.cli replay $FILES --kernels "$BUG" --backend cuda; echo "exit $?"

step "2. the same under compute-sanitizer (expect exit 1, 'invalid memory access' per case file)"
time "$PY" -m eaglefuzz.harness.cli replay --sanitize $FILES --kernels "$BUG" --backend cuda; echo "exit $?"

step "3. the production kernels under compute-sanitizer (expect exit 0)"
time "$PY" -m eaglefuzz.harness.cli replay --sanitize $FILES --backend cuda; echo "exit $?"

step "4. the seeded missing num_reqs guard (out-of-bounds reads and writes) under compute-sanitizer (expect exit 1, 'invalid memory access')"
time "$PY" -m eaglefuzz.harness.cli replay --sanitize corpus/eagle_prepare_inputs_padded_kernel/59458a2e3b76.json \
    --kernels "$BUGS/pi_missing_num_reqs_guard.py" --backend cuda; echo "exit $?"
