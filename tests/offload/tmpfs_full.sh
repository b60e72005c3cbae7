#!/usr/bin/env bash
# A real full disk: a 4 MiB tmpfs mounted for the test, and the I/O engine writing 8 MiB into it
# must fail naming "no space left" and the file. Mounting needs privileges a container often lacks:
# then the test reports itself skipped (exit 77, CTest's SKIP_RETURN_CODE), never passed. The
# fault-injection tests (fathom_offload_tests, fathom_zero_offload_tests) cover ENOSPC everywhere.
#   tests/offload/tmpfs_full.sh path/to/fathom_offload_bench
set -uo pipefail
bench=$1
mnt=$(mktemp -d)
trap 'umount "$mnt" 2>/dev/null; rmdir "$mnt"' EXIT
if ! mount -t tmpfs -o size=4m tmpfs "$mnt" 2>/dev/null; then
  echo "SKIPPED: cannot mount a tmpfs here (needs CAP_SYS_ADMIN); the fault-injection tests cover ENOSPC"
  exit 77
fi
output=$("$bench" io --dir "$mnt" --mib 8 --repeats 1 --backend threads 2>&1)
status=$?
echo "$output"
if [[ $status -ne 0 && "$output" == *"no space left on device"* && "$output" == *"$mnt/fathom_offload_bench.swp"* ]]; then
  echo "PASS: the full tmpfs stopped the write with the file named"
  exit 0
fi
echo "FAIL: expected an error naming 'no space left on device' and the file (exit status $status)"
exit 1
