#!/bin/sh
# fathom-config check and fathom-train agree on every config given: a config passes the check
# exactly when fathom-train trains with it; and the checker's resolved output, checked again,
# resolves to itself.
#   config_check_agrees.sh FATHOM_CONFIG FATHOM_TRAIN WORK_DIR CONFIG...
set -u
check=$1 train=$2 work=$3
shift 3
mkdir -p "$work"
status=0
for config in "$@"; do
  "$check" check "$config" --preset tiny --steps 2 >"$work/check.out" 2>&1
  checked=$?
  "$train" --config "$config" --preset tiny --steps 2 --eval-interval 0 --out "$work/run" >"$work/train.out" 2>&1
  trained=$?
  echo "$(basename "$config"): check exit $checked, fathom-train exit $trained"
  if [ "$checked" -eq 0 ] && [ "$trained" -ne 0 ]; then echo "  passes the check but does not train"; status=1; fi
  if [ "$checked" -ne 0 ] && [ "$trained" -eq 0 ]; then echo "  fails the check but trains"; status=1; fi
  if [ "$checked" -eq 0 ]; then
    sed -n '/^{/,$p' "$work/check.out" >"$work/resolved.json"
    "$check" check "$work/resolved.json" --preset tiny --steps 2 >"$work/again.out" 2>&1 || { echo "  resolved output fails the check"; status=1; }
    sed -n '/^{/,$p' "$work/again.out" | cmp -s - "$work/resolved.json" || { echo "  resolved output does not reload to itself"; status=1; }
  fi
done
[ "$status" -eq 0 ] && echo "check and fathom-train agree on every config"
exit "$status"
