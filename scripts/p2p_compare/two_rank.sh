# Sourced by build_and_run_nvshmem.sh and build_and_run_nccl_device.sh (the
# shell half of two_rank.h): run BIN as ranks 0 and 1, two local processes
# that meet through a unique-ID file, each under a 120 s timeout (a rank
# that dies leaves its peer in a barrier). Output goes to OUT_DIR/NAME0.txt
# and NAME1.txt and is printed; the caller's `fail` ends the script on a
# timeout or a non-zero exit.
#   run_two_ranks BIN OUT_DIR NAME LABEL    (LABEL: "rank" or "PE")
run_two_ranks() {
  local bin="$1" out="$2" name="$3" label="$4"
  local uid_file p0 p1 rc0 rc1
  uid_file="$(mktemp -u "$out/${name}_uid.XXXXXX")"
  timeout 120 "$bin" 0 "$uid_file" > "$out/${name}0.txt" 2>&1 & p0=$!
  timeout 120 "$bin" 1 "$uid_file" > "$out/${name}1.txt" 2>&1 & p1=$!
  wait $p0; rc0=$?
  wait $p1; rc1=$?
  rm -f "$uid_file"
  echo "---- $label 0 (exit $rc0)"; cat "$out/${name}0.txt"
  echo "---- $label 1 (exit $rc1)"; cat "$out/${name}1.txt"
  [ $rc0 -eq 124 ] || [ $rc1 -eq 124 ] && fail "timed out (120 s): exit codes $rc0/$rc1"
  [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || fail "$label exit codes $rc0/$rc1"
}
