#!/usr/bin/env bash
# The layering, checked: every quoted #include of every source file outside tests/, benchmarks/
# and examples/ must name its own unit or one its unit may include, as the table in
# docs/architecture.md ("Layers") says. A unit is a top-level folder, or one of the engine's
# subsystem folders (engine/config, engine/data, ...); apps/ and its subfolders are one unit.
#   tests/layering/check_layers.sh REPO_ROOT
# Prints each offending include as file:line and the edge; exits 1 if there is any.
set -euo pipefail
root=${1:?usage: check_layers.sh REPO_ROOT}
cd "$root"
table=docs/architecture.md
[[ -f $table ]] || { echo "no $table: the layer table lives there"; exit 2; }

# The table: the lines between "<!-- layers -->" and the end of the code block after it, each
# "unit: allowed units" ("*" allows every unit).
declare -A allowed
while IFS= read -r line; do
  unit=${line%%:*}
  allowed[$unit]=" ${line#*:} "
done < <(awk '/<!-- layers -->/ {on = 1; next} on && /^```/ {n++; if (n == 2) exit; next} on && n == 1 && NF' "$table")
(( ${#allowed[@]} > 0 )) || { echo "$table has no layer table (a code block after <!-- layers -->)"; exit 2; }

unit_of() {
  case $1 in
    engine/*/*) local sub=${1#engine/}; echo "engine/${sub%%/*}" ;;
    apps/*) echo apps ;;
    */*) echo "${1%%/*}" ;;
    *) echo . ;;
  esac
}

problems=0
# Each unit's CMakeLists.txt says what it may include, in a line the table must agree with.
for unit in "${!allowed[@]}"; do
  list="$unit/CMakeLists.txt"
  [[ $unit != . && -f $list ]] || continue
  said=$(sed -n 's/^# May include: \(.*\) (docs\/architecture.md, Layers; checked by tests\/layering)\.$/\1/p' "$list")
  expected=$(sed 's/^ *//; s/ *$//; s/  */ /g' <<<"${allowed[$unit]}")
  [[ -z $expected ]] && expected="nothing else"
  if [[ $said != "$expected" ]]; then
    echo "$list: says it may include \"${said:-(no '# May include:' line)}\", the table says \"$expected\""
    problems=$((problems + 1))
  fi
done

while IFS= read -r file; do
  unit=$(unit_of "$file")
  if [[ -z ${allowed[$unit]+set} ]]; then
    echo "$file: its folder ($unit) is not in $table's layer table; add it with what it may include"
    problems=$((problems + 1))
    continue
  fi
  while IFS=: read -r line include; do
    include=${include#*\"}; include=${include%\"*}
    [[ $include == */* ]] || continue  # a header beside the file (generated, or a test's own)
    target=$(unit_of "$include")
    [[ $target == "$unit" || ${allowed[$unit]} == *" * "* || ${allowed[$unit]} == *" $target "* ]] && continue
    echo "$file:$line: includes \"$include\": $unit may not include $target (docs/architecture.md, Layers)"
    problems=$((problems + 1))
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(find . -path ./build -prune -o -path './build-*' -prune -o -path ./.git -prune -o -path ./tests -prune \
           -o -path ./benchmarks -prune -o -path ./examples -prune \
           -o -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||' | sort)

if (( problems )); then
  echo "$problems layering problem(s)"
  exit 1
fi
echo "layering holds: ${#allowed[@]} units, every include allowed"
