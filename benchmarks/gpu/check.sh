#!/usr/bin/env bash
# Fathom's GPU check: the one prepared script to run whenever a GPU machine is available.
#
# Development machines have the CUDA toolkit but no GPU; the GPU machine has a GPU but is not
# Debian, installs nothing and may lack Open MPI, yaml-cpp, Catch2 and Eigen. So the test
# executables are built here and carried there as a bundle (prebuilt executables plus their
# non-CUDA shared libraries, <= 40 MiB, in the git-ignored benchmarks/gpu/bundle/), and this
# script runs them there within a fixed time budget, saving each output as it goes.
#
#   check.sh --pack  [--build DIR]   here:  build the bundle from DIR (default: build)
#   check.sh --local [--build DIR]   here:  pack, unpack into a temp dir, run it as the GPU
#                                           machine would (rehearsal; CUDA tests must say
#                                           "no CUDA device")
#   check.sh [--out DIR]             there: probe the machine, run the bundle, print a table
#   check.sh --help
#
# See docs/gpu.md. Packing lives in bundle_libs.sh beside this file.

set -u
set -o pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
BUNDLE_DIR="$SCRIPT_DIR/bundle"
TARBALL="$BUNDLE_DIR/fathom-bundle.tar.xz"
MAX_BUNDLE_MIB=40
# The whole GPU run must stay well under 8 minutes: the binaries share this budget (seconds),
# and each one is also capped on its own so that one hang cannot eat all of it.
BUDGET_S="${FATHOM_CHECK_BUDGET_S:-}"
TIMEOUT_S="${FATHOM_CHECK_TIMEOUT_S:-240}"

MODE=gpu
BUILD_DIR="$REPO_ROOT/build"
OUT_DIR=""
KEEP=0
CLEANUP_DIRS=()

# Outside root's PATH ldconfig may be hidden in /sbin.
LDCONFIG="$(command -v ldconfig 2>/dev/null || echo /sbin/ldconfig)"

log() { printf '%s\n' "$*"; }
warn() { printf 'check.sh: warning: %s\n' "$*" >&2; }
die() { printf 'check.sh: error: %s\n' "$*" >&2; exit 1; }
section() { printf '\n== %s ==\n' "$*"; }

cleanup() {
  local d
  if ((KEEP)); then
    for d in ${CLEANUP_DIRS[@]+"${CLEANUP_DIRS[@]}"}; do log "kept $d"; done
    return
  fi
  for d in ${CLEANUP_DIRS[@]+"${CLEANUP_DIRS[@]}"}; do rm -rf "$d"; done
}
trap cleanup EXIT

usage() {
  cat <<'EOF'
Usage: benchmarks/gpu/check.sh [MODE] [OPTIONS]

Fathom's GPU check. Development machines have no GPU, so the tests are built here, packed into
a bundle, carried to the GPU machine and run there by this same script.

Modes
  --pack      (dev machine) Build benchmarks/gpu/bundle/fathom-bundle.tar.xz from the build dir:
              libfathom.so*, every executable in build/tests/test_manifest.tsv, and every shared
              library they need except glibc and CUDA's own (cuBLAS, cuDNN, NCCL, libcuda, ...:
              those must match the GPU machine's driver and come from it). If libmpi is needed,
              Open MPI travels as a relocated install (plugins, help files, mpirun, orted).
              Binaries and libraries are stripped copies; bin/ and lib/ do not rely on RUNPATH
              (env.sh puts lib/ first in LD_LIBRARY_PATH). Writes manifest.tsv and versions.txt
              (git rev, date, build type, nvcc, highest GLIBC_x.y needed), compresses with xz,
              prints the size and fails if it is over 40 MiB (the GPU machine receives at most
              64 MiB in all).
  --local     (dev machine) Rehearsal: --pack, unpack into a fresh temp dir and run from there
              with LD_LIBRARY_PATH set to the bundle's lib dir only. Non-cuda binaries must
              pass; cuda binaries (run with CUDA_VISIBLE_DEVICES="") must exit non-zero and print
              "no CUDA device". Prints a table (binary | labels | result | seconds); exits 1 if
              any expectation fails.
  (default)   (GPU machine) Probe and print: GPU (nvidia-smi name, driver, memory), nvcc, CUDA
              runtime, where cuBLAS/cuDNN/NCCL are (ldconfig, /usr/local/cuda, Python wheels
              under site-packages/nvidia/*) and their versions, whether mpirun, yaml-cpp, Eigen
              and Catch2 exist, glibc versus the bundle's requirement. Then unpack the bundle
              into a temp dir, set LD_LIBRARY_PATH to its lib dir plus the CUDA library dirs
              found, run the cuda binaries first and the rest after, each under `timeout`, each
              output saved to the output dir as it runs, then the GPU benchmarks (manifest label
              `benchmark`, each writing its tables under the output dir), and print a summary
              table, also saved as summary.md.
              Exit status: 0 all passed, 1 something failed, 2 no bundle.
  --help      This text.

Options
  --build DIR   build dir for --pack/--local (default: <repo>/build)
  --out DIR     output dir (default: $FATHOM_CHECK_OUT, else $OUT, else check-out/;
                for --local: <build>/gpu-check-local)
  --bundle FILE bundle to run (default: benchmarks/gpu/bundle/fathom-bundle.tar.xz)
  --keep        keep the temp dirs (unpacked bundle) for inspection

Environment
  FATHOM_CHECK_OUT        output dir, as --out
  FATHOM_CHECK_TIMEOUT_S  per-binary time limit in seconds (default 240)
  FATHOM_CHECK_BUDGET_S   time budget for all binaries together (default 420 on the GPU
                          machine, 1800 for --local); binaries that no longer fit are skipped
  FATHOM_CHECK_PRETEND_GLIBC  act as if this machine's glibc were this version (tests the
                          fallback below)

glibc
  glibc does not travel. A bundled library that needs a newer glibc than the machine has (Debian
  12's libstdc++ needs 2.36) is moved aside so that the machine's own copy is used; executables
  and libfathom need the "glibc_floor" in versions.txt or newer, or a rebuild.

Typical use
  cmake -S . -B build -G Ninja && cmake --build build
  benchmarks/gpu/check.sh --local          # rehearse here; must pass
  benchmarks/gpu/check.sh --pack           # bundle for the GPU machine
  benchmarks/gpu/check.sh --out "$OUT"     # on the GPU machine (carry benchmarks/gpu/bundle)
EOF
}

while (($#)); do
  case "$1" in
    --pack) MODE=pack ;;
    --local) MODE=local ;;
    --help | -h) usage; exit 0 ;;
    --build) [[ $# -ge 2 ]] || die "--build needs a directory"; BUILD_DIR="$2"; shift ;;
    --build=*) BUILD_DIR="${1#--build=}" ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a directory"; OUT_DIR="$2"; shift ;;
    --out=*) OUT_DIR="${1#--out=}" ;;
    --bundle) [[ $# -ge 2 ]] || die "--bundle needs a file"; TARBALL="$2"; shift ;;
    --bundle=*) TARBALL="${1#--bundle=}" ;;
    --keep) KEEP=1 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done
BUILD_DIR="$(cd "$BUILD_DIR" 2>/dev/null && pwd || echo "$BUILD_DIR")"

# shellcheck source-path=SCRIPTDIR source=bundle_libs.sh
. "$SCRIPT_DIR/bundle_libs.sh"

# ---------------------------------------------------------------------------------------------
# Unpacking and running
# ---------------------------------------------------------------------------------------------

# Unpacks $TARBALL into a fresh temp dir and sets BUNDLE_ROOT. The GPU machine may lack xz,
# so Python's tarfile (which has its own lzma) is the fallback.
unpack_bundle() {
  local dest
  dest="$(mktemp -d "${TMPDIR:-/tmp}/fathom-bundle.XXXXXX")" || die "mktemp failed"
  CLEANUP_DIRS+=("$dest")
  if command -v xz >/dev/null 2>&1 && tar -C "$dest" -xJf "$TARBALL" 2>/dev/null; then
    :
  elif command -v python3 >/dev/null 2>&1; then
    log "(tar -xJf unavailable or failed; unpacking with python3 tarfile)"
    python3 - "$TARBALL" "$dest" <<'PY' || die "could not unpack $TARBALL"
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    if hasattr(tarfile, "tar_filter"):
        t.extractall(sys.argv[2], filter="tar")
    else:
        t.extractall(sys.argv[2])
PY
  else
    die "cannot unpack $TARBALL: neither xz nor python3 is available"
  fi
  BUNDLE_ROOT="$dest/fathom-bundle"
  [[ -f "$BUNDLE_ROOT/manifest.tsv" ]] || die "$TARBALL has no fathom-bundle/manifest.tsv (repack it)"
  mkdir -p "$dest/work"
  WORK_DIR="$dest/work"   # binaries run here, so stray files land in the temp dir
}

bundle_version() { sed -n "s/^$1: //p" "$BUNDLE_ROOT/versions.txt" 2>/dev/null | head -n 1; }

# Prints "name<TAB>labels" for the manifest entries of one kind: want=cuda (labelled `cuda`,
# not `benchmark`), want=other (neither), want=benchmark (GPU benchmarks: `cuda,benchmark`).
manifest_entries() {
  local want="$1" name labels kind
  while IFS=$'\t' read -r name labels; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    kind=other
    [[ ",${labels}," == *,cuda,* ]] && kind=cuda
    [[ ",${labels}," == *,benchmark,* ]] && kind=benchmark
    [[ "$kind" == "$want" ]] && printf '%s\t%s\n' "$name" "$labels"
  done <"$BUNDLE_ROOT/manifest.tsv"
}

# The command line for one manifest entry. Plain Catch2 binaries run as they are. Multi-rank
# tests (label `mpi`, rank count from a label `np<N>`, default 2) go through the bundled mpirun;
# --oversubscribe because a 2-core dev machine has fewer slots than -np 4.
# Later issues: adjust here if the manifest grows a different way to say how to launch.
# $3: the seconds this run may take; a benchmark labelled `budgeted` is told to fit in less (a
# quarter or more is left for the PyTorch peer that follows it), at most 120 s.
command_for() {
  local name="$1" labels="$2" limit="${3:-240}" np=2 l budget
  if [[ ",${labels}," == *,benchmark,* ]]; then
    # Benchmarks write their tables (markdown and TSV) under the output dir as well as printing them.
    printf '%s\n' "$BUNDLE_ROOT/bin/$name" --out "$OUT_DIR/$name"
    if [[ ",${labels}," == *,budgeted,* ]]; then
      budget=$(((limit - 15) * 3 / 4))
      ((budget > 120)) && budget=120
      ((budget < 10)) && budget=10
      printf '%s\n' --budget-seconds "$budget"
    fi
  elif [[ ",${labels}," == *,mpi,* ]]; then
    for l in ${labels//,/ }; do
      [[ "$l" =~ ^np([0-9]+)$ ]] && np="${BASH_REMATCH[1]}"
    done
    printf '%s\n' mpirun --oversubscribe -np "$np" "$BUNDLE_ROOT/bin/$name"
  else
    printf '%s\n' "$BUNDLE_ROOT/bin/$name"
  fi
}

RESULTS=()    # table rows: "binary<TAB>labels<TAB>result<TAB>seconds"
FAILURES=0

# Runs one binary with the bundle's environment. $3 says what counts as success:
#   pass    must exit 0
#   no-gpu  must exit non-zero and print "no CUDA device" (rehearsal on a machine without GPU)
# Output goes straight to $OUT_DIR/<name>.log while it runs, so a timeout still leaves it.
run_one() {
  local name="$1" labels="$2" expect="$3" logf="$OUT_DIR/$1.log"
  local left limit t0 secs rc result ok=1 cmd=()
  left=$((BUDGET_S - (SECONDS - RUN_START_S)))
  limit=$TIMEOUT_S
  ((left < limit)) && limit=$left
  if ((left < 2)); then
    RESULTS+=("$name"$'\t'"$labels"$'\t'"SKIPPED (time budget used up)"$'\t'"-")
    FAILURES=$((FAILURES + 1))
    return
  fi
  mapfile -t cmd < <(command_for "$name" "$labels" "$limit")
  log "-- $name [$labels] (limit ${limit}s) -> $logf"
  t0=$SECONDS
  # shellcheck disable=SC2030  # the environment is meant for this one run only
  (
    cd "$WORK_DIR" || exit 126
    export FATHOM_EXTRA_LD_PATH="$EXTRA_LD_PATH"
    # shellcheck source=/dev/null
    . "$BUNDLE_ROOT/env.sh"
    [[ "$expect" == no-gpu ]] && export CUDA_VISIBLE_DEVICES=""
    echo "# ${cmd[*]}"
    echo "# LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    if command -v timeout >/dev/null 2>&1; then
      exec timeout -k 10 "$limit" "${cmd[@]}"
    else
      exec "${cmd[@]}"
    fi
  ) </dev/null >"$logf" 2>&1
  rc=$?
  secs=$((SECONDS - t0))

  local summary=""
  # Catch2 v2's last line: "All tests passed (N assertions in M test cases)" or
  # "test cases: M | P passed | F failed".
  summary="$(grep -E '^(All tests passed|test cases:)' "$logf" | tail -n 1 |
    sed -E 's/^All tests passed \(([0-9]+) assertions? in ([0-9]+) test cases?\)/\2 cases/; s/^test cases: */cases: /; s/ *\| */, /g')"
  if ((rc == 124 || rc == 137)); then
    result="TIMEOUT after ${limit}s"
    ok=0
  elif grep -q 'error while loading shared libraries' "$logf"; then
    result="FAIL: cannot start ($(grep -o 'error while loading shared libraries: [^:]*' "$logf" | head -n 1 | sed 's/.*: //') missing)"
    ok=0
  elif [[ "$expect" == no-gpu ]]; then
    if ((rc == 0)); then
      result="FAIL: passed without a GPU"
      ok=0
    elif grep -qi 'no CUDA device' "$logf"; then
      result="ok: exit $rc, \"no CUDA device\""
    else
      result="FAIL: exit $rc without \"no CUDA device\""
      ok=0
    fi
  elif ((rc == 0)); then
    result="pass${summary:+ ($summary)}"
  else
    result="FAIL: exit $rc${summary:+ ($summary)}"
    grep -qi 'no CUDA device' "$logf" && result="$result, \"no CUDA device\": GPU not visible?"
    ok=0
  fi
  RESULTS+=("$name"$'\t'"$labels"$'\t'"$result"$'\t'"$secs")
  if ((ok)); then
    log "   $result (${secs}s)"
  else
    FAILURES=$((FAILURES + 1))
    log "   $result (${secs}s); last lines of $logf:"
    tail -n 15 "$logf" | sed 's/^/   | /'
  fi
}

# Checks, before anything runs, that every bundled executable finds all its libraries with the
# environment it will run under, and (with $1 = strict) that whatever the bundle carries is
# taken from the bundle and not from the system. Saves the full ldd output as ldd.txt.
preflight() {
  local strict="${1:-}" f line bad=0
  : >"$OUT_DIR/ldd.txt"
  for f in "$BUNDLE_ROOT"/bin/*; do
    [[ -f "$f" && ! -L "$f" ]] || continue
    {
      echo "## $(basename "$f")"
      # shellcheck disable=SC2031
      (
        export FATHOM_EXTRA_LD_PATH="$EXTRA_LD_PATH"
        # shellcheck source=/dev/null
        . "$BUNDLE_ROOT/env.sh"
        ldd "$f" 2>&1
      )
    } >>"$OUT_DIR/ldd.txt"
  done
  while IFS= read -r line; do
    log "   MISSING: $line"
    bad=1
  done < <(awk '/^## /{b=$2} /not found/{sub(/^[ \t]+/, ""); print b ": " $0}' "$OUT_DIR/ldd.txt")
  if [[ "$strict" == strict ]]; then
    local lib
    for lib in "$BUNDLE_ROOT"/lib/*; do
      lib="$(basename "$lib")"
      while IFS= read -r line; do
        log "   NOT FROM BUNDLE: $line"
        bad=1
      done < <(awk -v l="$lib" -v root="$BUNDLE_ROOT/lib/" '/^## /{b=$2} $1 == l && index($3, root) != 1 {print b ": " l " => " $3}' "$OUT_DIR/ldd.txt")
    done
  fi
  ((bad)) && return 1
  log "   every executable finds its libraries (ldd output: $OUT_DIR/ldd.txt)"
  return 0
}

# Prints the results as a Markdown table (renders fine on a terminal, pastes into docs/gpu.md).
print_table() {
  local row name labels result secs
  echo "| binary | labels | result | seconds |"
  echo "|---|---|---|---|"
  for row in ${RESULTS[@]+"${RESULTS[@]}"}; do
    IFS=$'\t' read -r name labels result secs <<<"$row"
    echo "| $name | $labels | ${result//|/\\|} | $secs |"
  done
}

# ---------------------------------------------------------------------------------------------
# GPU machine: probing
# ---------------------------------------------------------------------------------------------

# Sets EXTRA_LD_PATH (colon-separated) to the dirs holding cuBLAS, cuDNN and NCCL, toolkit dirs
# first so that cuBLAS matches nvcc; and PY_PROBE to what Python reported about the nvidia wheels.
EXTRA_LD_PATH=""
PY_PROBE=""
add_ld_dir() {
  local d="$1"
  [[ -d "$d" ]] || return 0
  d="$(cd "$d" && pwd -P)"
  [[ ":$EXTRA_LD_PATH:" == *":$d:"* ]] && return 0
  EXTRA_LD_PATH="${EXTRA_LD_PATH:+$EXTRA_LD_PATH:}$d"
}
discover_cuda_libs() {
  local d cuda_home toolkit_cublas=0
  for cuda_home in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-13*; do
    [[ -n "$cuda_home" ]] || continue
    for d in "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/targets/x86_64-linux/lib"; do
      compgen -G "$d/libcublas.so*" >/dev/null && toolkit_cublas=1
      compgen -G "$d/libcublas.so*" >/dev/null || compgen -G "$d/libcudnn.so*" >/dev/null ||
        compgen -G "$d/libnccl.so*" >/dev/null || continue
      add_ld_dir "$d"
    done
  done
  command -v python3 >/dev/null 2>&1 || return 0
  # The wheels are namespace packages (nvidia.cudnn, nvidia.nccl, nvidia.cublas, or nvidia/cu13
  # for CUDA-13 wheels); rather than trust one layout, import what exists and search for the libs.
  PY_PROBE="$(timeout 30 python3 - <<'PY' 2>&1
import glob, importlib, os, site, sys
roots = []
for mod in ("nvidia.cudnn", "nvidia.nccl", "nvidia.cublas", "nvidia.cu13", "nvidia"):
    try:
        m = importlib.import_module(mod)
        paths = list(getattr(m, "__path__", []))
        print(f"IMPORT {mod} {paths[0] if paths else '?'}")
        roots += paths
    except Exception as e:
        print(f"IMPORT {mod} no ({type(e).__name__})")
try:
    sp = site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    sp = []
sp += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
roots += [os.path.join(p, "nvidia") for p in sp]
seen = set()
for r in dict.fromkeys(os.path.realpath(r) for r in roots):
    for pat in ("libcudnn.so*", "libnccl.so*", "libcublas.so*", "libcublasLt.so*"):
        for f in glob.glob(os.path.join(r, "**", pat), recursive=True):
            d = os.path.dirname(os.path.realpath(f))
            if (d, pat) not in seen:
                seen.add((d, pat))
                print(f"LIB {pat.split('.')[0]} {d} {os.path.basename(os.path.realpath(f))}")
try:
    import importlib.metadata as md
    for dist in md.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith("nvidia-"):
            print(f"DIST {name} {dist.version}")
except Exception as e:
    print(f"DIST ? ({type(e).__name__})")
PY
)"
  local kind dir file
  while read -r _ kind dir file; do
    # cuBLAS from a wheel only if the toolkit gave none.
    [[ "$kind" == libcublas* ]] && ((toolkit_cublas)) && continue
    add_ld_dir "$dir"
  done < <(grep '^LIB ' <<<"$PY_PROBE")
  return 0
}

# "#define PREFIX_MAJOR 9" etc. -> "9.19.0"
header_version() {
  local file="$1" maj="$2" min="$3" pat="$4"
  [[ -f "$file" ]] || return 1
  local a b c
  a="$(sed -nE "s/^#define $maj +([0-9]+).*/\1/p" "$file" | head -n 1)"
  b="$(sed -nE "s/^#define $min +([0-9]+).*/\1/p" "$file" | head -n 1)"
  c="$(sed -nE "s/^#define $pat +([0-9]+).*/\1/p" "$file" | head -n 1)"
  [[ -n "$a" ]] && echo "$a.$b.$c"
}

# Where the loader would find a library: our extra dirs first, then the ldconfig cache.
where_lib() {
  local name="$1" d f
  local IFS=:
  for d in $EXTRA_LD_PATH; do
    for f in "$d"/"$name".so.*[0-9]; do
      [[ -e "$f" ]] && { echo "$(basename "$(readlink -f "$f")") in $d"; return 0; }
    done
  done
  f="$("$LDCONFIG" -p 2>/dev/null | awk -v n="$name.so" 'index($1, n) == 1 {print $NF; exit}')"
  [[ -n "$f" ]] && { echo "$(basename "$(readlink -f "$f")") in $(dirname "$f") (ldconfig)"; return 0; }
  echo "not found"
  return 1
}

# Looks for a header under the usual include roots and the wheels' include dirs.
find_header() {
  local rel="$1" d
  for d in /usr/local/cuda/include /usr/include /usr/local/include ${EXTRA_LD_PATH//:/ }; do
    [[ -f "$d/$rel" ]] && { echo "$d/$rel"; return 0; }
    [[ -f "$d/../include/$rel" ]] && { echo "$d/../include/$rel"; return 0; }
  done
  return 1
}

first_dir() {
  local d
  for d in "$@"; do [[ -d "$d" ]] && { echo "$d"; return 0; }; done
  echo "not found"
}

probe_machine() {
  local q h
  section "machine"
  log "host: $(hostname 2>/dev/null) | $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}") | $(nproc 2>/dev/null) CPUs | $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo 2>/dev/null)"
  log "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1)"

  section "GPU"
  if command -v nvidia-smi >/dev/null 2>&1; then
    q="$(timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 ||
      timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1)"
    log "nvidia-smi: ${q//$'\n'/$'\n'nvidia-smi: }"
    h="$(timeout 30 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | head -n 1)"
    log "driver supports: ${h:-unknown}"
  else
    log "nvidia-smi: not found"
  fi
  # shellcheck disable=SC2031  # run_one's change is local to its subshell, as intended
  log "CUDA_VISIBLE_DEVICES: ${CUDA_VISIBLE_DEVICES-<unset>}"

  section "CUDA toolkit and libraries"
  local nvcc
  nvcc="$(command -v nvcc 2>/dev/null || { [[ -x /usr/local/cuda/bin/nvcc ]] && echo /usr/local/cuda/bin/nvcc; })"
  log "nvcc: ${nvcc:-not found}${nvcc:+ ($("$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*'))}"
  log "CUDA runtime: static in the bundled binaries (the bundle's nvcc version, below); toolkit's shared one: $(where_lib libcudart)"
  log "libcuda (driver): $(where_lib libcuda)"
  log "cuBLAS:   $(where_lib libcublas); header $(header_version "$(find_header cublas_api.h)" CUBLAS_VER_MAJOR CUBLAS_VER_MINOR CUBLAS_VER_PATCH || echo 'not found')"
  log "cuBLASLt: $(where_lib libcublasLt)"
  log "cuDNN:    $(where_lib libcudnn); header $(header_version "$(find_header cudnn_version.h)" CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL || echo 'not found')"
  log "NCCL:     $(where_lib libnccl); header $(header_version "$(find_header nccl.h)" NCCL_MAJOR NCCL_MINOR NCCL_PATCH || echo 'not found')"
  if [[ -n "$PY_PROBE" ]]; then
    log "python3 ($(python3 --version 2>&1)):"
    grep -E '^(IMPORT|LIB|DIST) ' <<<"$PY_PROBE" | sed 's/^/  /'
  else
    log "python3: not found"
  fi
  log "library dirs added to LD_LIBRARY_PATH: ${EXTRA_LD_PATH:-none}"

  section "other tools and libraries"
  local mpirun_path
  mpirun_path="$(command -v mpirun 2>/dev/null)"
  log "mpirun:   ${mpirun_path:-not found}${mpirun_path:+ ($(timeout 10 mpirun --version 2>&1 | head -n 1))}"
  log "yaml-cpp: $(where_lib libyaml-cpp || true)$(compgen -G '/usr*/include/yaml-cpp' >/dev/null && echo ', headers present')"
  log "Eigen:    $(first_dir /usr/include/eigen3 /usr/local/include/eigen3)"
  log "Catch2:   $(first_dir /usr/include/catch2 /usr/local/include/catch2)"
  log "cmake:    $(cmake --version 2>/dev/null | head -n 1 || echo 'not found')"
  log "ninja:    $(ninja --version 2>/dev/null || echo 'not found')"
  log "c++:      $(c++ --version 2>/dev/null | head -n 1 || echo 'not found')"
  log "xz:       $(command -v xz || echo 'not found (python3 tarfile is the fallback)')"
}

# glibc cannot travel with the bundle; compare what the bundle needs with what is here. A
# bundled library that needs a newer glibc than this machine's (Debian 12's libstdc++ needs
# 2.36; Ubuntu 22.04 has 2.35) is moved aside so that the loader takes this machine's copy of
# the same library instead; preflight's ldd then shows whether that copy is new enough
# (GLIBCXX_*). Executables, libfathom and Open MPI have no such fallback: they need a rebuild
# on an older distribution. FATHOM_CHECK_PRETEND_GLIBC=2.35 exercises this path anywhere.
check_glibc() {
  local have need floor path v soname host_copy
  have="${FATHOM_CHECK_PRETEND_GLIBC:-$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')}"
  need="$(bundle_version glibc_required)"
  floor="$(bundle_version glibc_floor)"
  if [[ -z "$have" || -z "$need" ]]; then
    log "glibc: here ${have:-unknown}, bundle needs ${need:-unknown}"
    return 0
  fi
  if version_le "$need" "$have"; then
    log "glibc: here $have >= $need needed by the bundle: ok"
    return 0
  fi
  log "glibc: here $have < $need needed by some bundled files (executables need ${floor:-?}):"
  [[ -f "$BUNDLE_ROOT/glibc.tsv" ]] || { log "  (bundle has no glibc.tsv; repack it)"; return 0; }
  mkdir -p "$BUNDLE_ROOT/lib.unused"
  while IFS=$'\t' read -r path v; do
    version_le "$v" "$have" && continue
    soname="$(basename "$path")"
    if [[ "$path" == lib/* && "$soname" != libfathom* ]]; then
      host_copy="$("$LDCONFIG" -p 2>/dev/null | awk -v n="$soname" '$1 == n && /x86-64/ {print $NF; exit}')"
      if [[ -n "$host_copy" ]]; then
        mv "$BUNDLE_ROOT/$path" "$BUNDLE_ROOT/lib.unused/"
        log "  $path needs $v: using this machine's $host_copy instead"
        continue
      fi
      log "  $path needs $v and this machine has no $soname: whatever needs it will not start"
    else
      log "  $path needs $v: it will not start here; rebuild on a distribution with glibc <= $have"
    fi
  done <"$BUNDLE_ROOT/glibc.tsv"
}

version_le() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" == "$1" ]]; }

# ---------------------------------------------------------------------------------------------
# GPU benchmarks. Later issues add them here (GEMM GFLOP/s against peak, kernel GB/s, training
# tokens/s and MFU; see docs/architecture.md and docs/gpu.md). Each should run under run_one (same budget,
# same log-as-you-go) or write its JSON into $OUT_DIR. A build dir that writes
# benchmarks/bench_manifest.tsv (same format as the test manifest) is not packed yet.
# ---------------------------------------------------------------------------------------------
run_benchmarks() {
  section "GPU benchmarks"
  local name labels
  [[ -n "$(manifest_entries benchmark)" ]] || { log "the bundle has no GPU benchmarks"; return; }
  while IFS=$'\t' read -r name labels; do
    run_one "$name" "$labels" pass
    # The tables themselves, in the log as well as in $OUT_DIR/<name>/.
    grep -E '^(\||#|[A-Za-z].*:)' "$OUT_DIR/$name.log" | grep -v '^# ' | sed 's/^/  /'
  done < <(manifest_entries benchmark)
  run_llama_rows
  run_torch_peer
}

# The Llama rows (issue 50): fathom_gpt2_bench again with --arch llama (llama-100M: GQA 12:4,
# RoPE, SwiGLU, untied, 32000-token vocabulary), ZeRO 0 and 3, bf16, in a budget of its own.
run_llama_rows() {
  local bin="$BUNDLE_ROOT/bin/fathom_gpt2_bench" logf="$OUT_DIR/fathom_gpt2_bench_llama.log" left budget t0 rc secs result
  section "Llama rows (fathom_gpt2_bench --arch llama)"
  if [[ ! -x "$bin" ]]; then
    log "skipped: the bundle has no fathom_gpt2_bench"
    return
  fi
  left=$((BUDGET_S - (SECONDS - RUN_START_S)))
  if ((left < 60)); then
    log "skipped: ${left}s of the ${BUDGET_S}s budget left, the rows need about 60s"
    RESULTS+=("fathom_gpt2_bench --arch llama"$'\t'"benchmark"$'\t'"skipped (time budget: ${left}s left)"$'\t'"-")
    return
  fi
  budget=$((left - 30))
  ((budget > 90)) && budget=90
  t0=$SECONDS
  timeout -k 10 $((budget + 60)) "$bin" --arch llama --preset 100M --stages 0,3 --budget-seconds "$budget" \
    --out "$OUT_DIR/fathom_gpt2_bench_llama" </dev/null >"$logf" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
  if ((rc == 124 || rc == 137)); then result="TIMEOUT after $((budget + 60))s"; FAILURES=$((FAILURES + 1))
  elif ((rc == 0)); then result="pass"
  else result="FAIL: exit $rc"; FAILURES=$((FAILURES + 1)); tail -n 15 "$logf" | sed 's/^/   | /'
  fi
  RESULTS+=("fathom_gpt2_bench --arch llama"$'\t'"benchmark"$'\t'"$result"$'\t'"$secs")
  log "   $result (${secs}s)"
  grep -E '^(\||[A-Za-z].*:)' "$logf" | sed 's/^/  /'
}

# Column `col` (by header name) of the first row of a TSV whose first column is `key`.
tsv_value() {
  local file="$1" key="$2" col="$3"
  [[ -f "$file" ]] || return 0
  awk -F'\t' -v key="$key" -v col="$col" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == col) c = i; next }
    c && $1 == key { print $c; exit }' "$file"
}

# "  Fathom (ZeRO 0) / <peer>: <ratio>  (<fathom> / <peer> tokens/s)", or n/a without both numbers.
ratio_line() {
  local fathom="$1" what="$2" peer="$3"
  if [[ "$fathom" =~ ^[0-9.]+$ && "$peer" =~ ^[0-9.]+$ ]] && awk -v t="$peer" 'BEGIN { exit !(t > 0) }'; then
    awk -v f="$fathom" -v t="$peer" -v w="$what" 'BEGIN { printf "  Fathom (ZeRO 0) / %s: %.3f  (%.0f / %.0f tokens/s)\n", w, f / t, f, t }'
  else
    echo "  Fathom (ZeRO 0) / $what: n/a (Fathom: ${fathom:-no result}, $what: ${peer:-no result})"
  fi
}

# The PyTorch peer of fathom_gpt2_bench (torch_gpt2.py, beside this script in the checkout; it is
# not in the bundle), with the machine's own python3 and environment, not the bundle's. Same
# batch and sequence as the Fathom stage-0 run (halved there if it ran out of memory), then the
# ratios of tokens/s. A peer failure is shown but does not fail the check.
run_torch_peer() {
  local script="$SCRIPT_DIR/torch_gpt2.py" fathom_tsv="$OUT_DIR/fathom_gpt2_bench/gpt2.tsv"
  local peer_dir="$OUT_DIR/torch_gpt2" logf="$OUT_DIR/torch_gpt2.log"
  local left budget batch seq t0 rc secs result fathom eager compiled
  section "PyTorch peer (torch_gpt2.py)"
  if [[ ! -f "$script" ]]; then
    log "skipped: $script not found"
    return
  fi
  if ! command -v python3 >/dev/null 2>&1 || ! timeout 120 python3 -c "import torch" >/dev/null 2>&1; then
    log "skipped: python3 cannot import torch here"
    RESULTS+=("torch_gpt2.py"$'\t'"peer"$'\t'"skipped (no torch)"$'\t'"-")
    return
  fi
  left=$((BUDGET_S - (SECONDS - RUN_START_S)))
  if ((left < 90)); then
    log "skipped: ${left}s of the ${BUDGET_S}s budget left, the peer needs about 90s"
    RESULTS+=("torch_gpt2.py"$'\t'"peer"$'\t'"skipped (time budget: ${left}s left)"$'\t'"-")
    return
  fi
  budget=$((left - 15))
  ((budget > 150)) && budget=150
  batch="$(tsv_value "$fathom_tsv" 0 batch)"
  seq="$(tsv_value "$fathom_tsv" 0 seq)"
  [[ "$batch" =~ ^[0-9]+$ ]] || batch=16
  [[ "$seq" =~ ^[0-9]+$ ]] || seq=1024
  log "-- torch_gpt2.py --batch $batch --seq $seq --budget-seconds $budget -> $logf"
  t0=$SECONDS
  timeout -k 10 $((budget + 60)) python3 "$script" --batch "$batch" --seq "$seq" --budget-seconds "$budget" \
    --out "$peer_dir" </dev/null >"$logf" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
  if ((rc == 124 || rc == 137)); then
    result="TIMEOUT after $((budget + 60))s"
  elif grep -q '^skipped: ' "$logf"; then
    result="$(grep -m 1 '^skipped: ' "$logf")"
  elif ((rc == 0)); then
    result="pass"
  else
    result="FAIL: exit $rc"
    tail -n 15 "$logf" | sed 's/^/   | /'
  fi
  RESULTS+=("torch_gpt2.py"$'\t'"peer"$'\t'"$result (not counted)"$'\t'"$secs")
  log "   $result (${secs}s)"
  grep -E '^(\||[A-Za-z].*:)' "$logf" | sed 's/^/  /'

  fathom="$(tsv_value "$fathom_tsv" 0 tokens_per_s)"
  eager="$(tsv_value "$peer_dir/torch_gpt2.tsv" eager tokens_per_s)"
  compiled="$(tsv_value "$peer_dir/torch_gpt2.tsv" compile tokens_per_s)"
  {
    echo "Fathom vs PyTorch, GPT-2 training step, batch $batch x $seq, bf16, AdamW, tokens/s:"
    ratio_line "$fathom" torch.compile "$compiled"
    ratio_line "$fathom" "torch eager" "$eager"
  } | tee "$OUT_DIR/gpt2_vs_torch.txt"
}

# ---------------------------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------------------------

mode_pack() {
  section "pack ($BUILD_DIR)"
  fathom_pack || exit 1
}

mode_local() {
  BUDGET_S="${BUDGET_S:-1800}"
  mode_pack
  OUT_DIR="${OUT_DIR:-$BUILD_DIR/gpu-check-local}"
  mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
  rm -f "$OUT_DIR"/*.log

  section "rehearsal: unpack and run without a GPU"
  unpack_bundle
  log "unpacked into $BUNDLE_ROOT"
  log "LD_LIBRARY_PATH=$BUNDLE_ROOT/lib only (CUDA libraries, if any, come from ldconfig as on the GPU machine)"
  check_glibc
  preflight strict || FAILURES=$((FAILURES + 1))
  RUN_START_S=$SECONDS
  local name labels n=0
  while IFS=$'\t' read -r name labels; do
    run_one "$name" "$labels" pass
    n=$((n + 1))
  done < <(manifest_entries other)
  while IFS=$'\t' read -r name labels; do
    run_one "$name" "$labels" no-gpu
    n=$((n + 1))
  done < <(manifest_entries cuda; manifest_entries benchmark)
  [[ -n "$(manifest_entries cuda)" ]] || log "(no cuda-labelled binaries in the manifest: was the build configured without nvcc?)"

  section "rehearsal results ($n binaries; logs in $OUT_DIR)"
  print_table | tee "$OUT_DIR/summary.md"
  if ((FAILURES)); then
    log "REHEARSAL FAILED ($FAILURES problems)"
    exit 1
  fi
  log "rehearsal passed: the bundle is ready for the GPU machine ($TARBALL)"
}

mode_gpu() {
  BUDGET_S="${BUDGET_S:-420}"
  OUT_DIR="${OUT_DIR:-${FATHOM_CHECK_OUT:-${OUT:-check-out}}}"
  mkdir -p "$OUT_DIR" || die "cannot create output dir $OUT_DIR"
  OUT_DIR="$(cd "$OUT_DIR" && pwd)"
  local started
  started="$(date -u '+%Y-%m-%d %H:%M UTC')"
  log "Fathom GPU check, $started; output in $OUT_DIR"

  GPU_LINE=""   # set from probe.txt below (probe_machine runs in a pipeline subshell)
  discover_cuda_libs
  BUNDLE_ROOT=""
  # Printed and saved; the probe runs in a pipeline (a subshell), so everything it needs was
  # discovered above and it sets nothing that is used later except what it prints.
  probe_machine 2>&1 | tee "$OUT_DIR/probe.txt"
  GPU_LINE="$(sed -n 's/^nvidia-smi: //p' "$OUT_DIR/probe.txt" | head -n 1)"
  [[ "$GPU_LINE" == "not found" ]] && GPU_LINE="no nvidia-smi"
  [[ "$GPU_LINE" =~ ^[0-9]+,\ (.*)$ ]] && GPU_LINE="${BASH_REMATCH[1]}"   # drop the GPU index

  section "bundle"
  if [[ ! -f "$TARBALL" ]]; then
    log "no bundle at $TARBALL"
    log "make one on a development machine (it has no GPU but has the build):"
    log "  cmake -S . -B build -G Ninja && cmake --build build"
    log "  benchmarks/gpu/check.sh --pack"
    log "then carry benchmarks/gpu/bundle to this machine and run benchmarks/gpu/check.sh again."
    exit 2
  fi
  unpack_bundle
  sed 's/^/  /' "$BUNDLE_ROOT/versions.txt" | tee "$OUT_DIR/versions.txt"
  check_glibc | tee -a "$OUT_DIR/probe.txt"
  preflight || FAILURES=$((FAILURES + 1))

  RUN_START_S=$SECONDS
  local name labels
  section "cuda tests (budget ${BUDGET_S}s for all binaries, at most ${TIMEOUT_S}s each)"
  [[ -n "$(manifest_entries cuda)" ]] || log "the bundle has no cuda-labelled binaries (built without nvcc?)"
  while IFS=$'\t' read -r name labels; do
    run_one "$name" "$labels" pass
  done < <(manifest_entries cuda)
  section "other tests"
  while IFS=$'\t' read -r name labels; do
    run_one "$name" "$labels" pass
  done < <(manifest_entries other)

  run_benchmarks

  section "summary"
  {
    echo "# Fathom GPU check"
    echo
    echo "- date: $started"
    echo "- machine: ${GPU_LINE:-unknown GPU}; $(hostname 2>/dev/null); $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}")"
    echo "- bundle: git $(bundle_version git_rev), built $(bundle_version date), $(bundle_version build_type), nvcc $(bundle_version nvcc)"
    # fathom_cuda_tests prints "cuda:0 <name>, sm_XY, ..., driver N, runtime M" when it finds a GPU.
    local seen
    seen="$(cat "$OUT_DIR"/*.log 2>/dev/null | grep -m 1 -E '^cuda:0 ' || true)"
    echo "- device as the CUDA runtime sees it: ${seen:-not reported}"
    echo "- total time: $((SECONDS))s; failures: $FAILURES"
    echo
    print_table
  } | tee "$OUT_DIR/summary.md"
  ((FAILURES)) && exit 1
  exit 0
}

case "$MODE" in
  pack) mode_pack ;;
  local) mode_local ;;
  gpu) mode_gpu ;;
esac
