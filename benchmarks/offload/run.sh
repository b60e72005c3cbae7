#!/usr/bin/env bash
# Optimizer offload in one run, one table (docs/benchmarks.md, "Optimizer offload"):
#   1. the CPU Adam's GB/s beside a STREAM-like triad and PyTorch's CPU AdamW (default, foreach
#      and fused=True, at 1 and 2 threads; the best is the peer), from a scratch virtual env;
#   2. the I/O engine's swap write and read GB/s (io_uring and threads) beside dd with O_DIRECT
#      on the same file system, in the same run;
#   3. GPT step time at ZeRO stage 2 with offload none / cpu / nvme (a small GPT and a ~100M one),
#      the optimizer step's share, bytes swapped per step, the time the step waited on I/O and
#      the peak RSS;
#   4. ZeRO-Infinity at stage 3: the ~100M GPT with its parameters offloaded to nvme too
#      (offload_param; max_in_cpu and buffer_size 2e7), beside stage 3 without offload, with the
#      I/O efficiency: (bytes read / dd's read GB/s + bytes written / dd's write GB/s) / step time;
#   5. the largest GPT (n_layer on a ladder) that trains under a per-rank memory cap without
#      offload, with nvme optimizer offload, and with both offloaded at stage 3.
#   6. with --headline: ZeRO-Infinity's claim at this machine's scale — the GPT-2 XL shape (48 layers,
#      1600 wide, 25 heads, vocabulary 50257, ~1.56B parameters: 16 B/parameter of model states is
#      11.6× 2 GiB) one step on one rank under FATHOM_CPU_MEMORY_LIMIT_MB=2048, after checking
#      that the swap directory has the ~34 GB its swap files need (skipped with the reason if not);
#      the row says how the step went, or the error that stopped it.
#   benchmarks/offload/run.sh [build-dir] [--dir SWAPDIR] [--cap MiB] [--quick] [--headline | --headline-only]
# --headline-only: dd and the headline rows alone.
# SWAPDIR (default: build-dir/offload-bench) must be on a local disk with O_DIRECT.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=build swap="" cap=1024 quick=0 headline=0 only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) swap=$2; shift 2 ;;
    --cap) cap=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --headline) headline=1; shift ;;
    --headline-only) headline=1 only=1; shift ;;
    *) build=$1; shift ;;
  esac
done
bench=$build/benchmarks/offload/fathom_offload_bench
[[ -x "$bench" ]] || { echo "no benchmark binary at $bench (build the fathom_offload_bench target)" >&2; exit 1; }
swap=${swap:-$build/offload-bench}
mkdir -p "$swap"
venv=${FATHOM_BENCH_VENV:-$build/bench-venv}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
results=$(mktemp)
trap 'rm -f "$results" "$swap/dd.bin"' EXIT
record() { grep '^RESULT ' | sed 's/^RESULT //' >>"$results"; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores," \
     "CPU flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')," \
     "swap dir $swap on $(df -T "$swap" | awk 'NR==2 {print $2 " " $1}'); $(date '+%Y-%m-%d %H:%M %Z')"

elements=$((32 << 20))
((only)) || "$bench" adam --elements $elements | record
if ((only)); then
  :
elif [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "installing PyTorch (CPU peer) into $venv ..."
  python3 -m venv "$venv" && "$venv/bin/pip" install -q torch numpy
fi
if ((only)); then
  :
elif "$venv/bin/python" -c "import torch" 2>/dev/null; then
  for impl in default foreach fused; do
    for threads in 1 2; do
      "$venv/bin/python" benchmarks/offload/torch_adam.py --elements $elements --impl $impl --threads $threads | record
    done
  done
else
  echo "(PyTorch unavailable: its rows are skipped)"
fi

mib=$((quick ? 256 : 1024))
dd_write=$(dd if=/dev/zero of="$swap/dd.bin" bs=1M count=$mib oflag=direct conv=fdatasync 2>&1 | tail -1)
dd_read=$(dd if="$swap/dd.bin" of=/dev/null bs=1M iflag=direct 2>&1 | tail -1)
echo "{\"mode\": \"dd\", \"write\": \"$dd_write\", \"read\": \"$dd_read\"}" >>"$results"
if ((! only)); then
for backend in io_uring threads; do
  "$bench" io --dir "$swap" --mib $mib --backend $backend | record
done
"$bench" io --dir "$swap" --mib $mib --backend io_uring --queue-depth 32 --threads 2 | record
# The kernel interfaces themselves, through fio when it is installed (Debian's fio; a benchmark
# peer only): libaio (what DeepSpeed's aio uses) against io_uring, same block size and depth.
if command -v fio >/dev/null 2>&1; then
  for engine in libaio io_uring; do
    for rw in write read; do
      fio --name=fathom --filename="$swap/fio.bin" --size=${mib}M --bs=1M --iodepth=8 --direct=1 --ioengine=$engine \
          --rw=$rw --output-format=terse --terse-version=3 2>/dev/null |
        awk -F';' -v e=$engine -v r=$rw '{ printf "{\"mode\": \"fio\", \"engine\": \"%s\", \"rw\": \"%s\", \"gbs\": %.3f}\n", e, r, (r == "read" ? $7 : $48) * 1024 / 1e9 }' >>"$results"
    done
  done
  rm -f "$swap/fio.bin"
else
  echo "(fio not installed: the libaio / io_uring rows are skipped; apt-get install fio)"
fi

models=("--layers 4 --width 512 --heads 8 --vocab 8192")
((quick)) || models+=("--layers 12 --width 768 --heads 12 --vocab 16384")
for model in "${models[@]}"; do
  for offload in none cpu nvme; do
    # shellcheck disable=SC2086
    "$bench" step --offload $offload --dir "$swap" $model --steps 3 --sub-group 5000000 --pipeline | record
  done
done

infinity=(--param nvme --max-in-cpu 20000000 --buffer-size 20000000)
gpt100m="--layers 12 --width 768 --heads 12 --vocab 16384"
((quick)) && gpt100m="--layers 4 --width 512 --heads 8 --vocab 8192"
for placement in "--offload none" "--offload nvme ${infinity[*]}"; do
  # shellcheck disable=SC2086
  "$bench" step --stage 3 $placement --dir "$swap" $gpt100m --steps 3 --sub-group 5000000 --pipeline | record
done

# The largest model under the cap: n_layer up the ladder until a step fails (width 768).
largest() {
  local name=$1 best=0
  shift
  for layers in 2 4 6 8 12 16 20 24 32 40 48; do
    # shellcheck disable=SC2086
    if FATHOM_CPU_MEMORY_LIMIT_MB=$cap "$bench" step "$@" --dir "$swap" --layers $layers --width 768 \
         --heads 12 --vocab 16384 --steps 1 --sub-group 2000000 --pipeline >/dev/null 2>&1; then
      best=$layers
    else
      break
    fi
  done
  echo "{\"mode\": \"largest\", \"offload\": \"$name\", \"cap_mib\": $cap, \"layers\": $best}" >>"$results"
}
((quick)) || {
  largest none --offload none
  largest nvme --offload nvme
  largest infinity --stage 3 --offload nvme "${infinity[@]}"
}

fi

if ((headline)); then
  # Swap files: 2 B/parameter (bf16 shard) + 12 B (fp32 master and Adam moments) + 4 B (fp32
  # gradient) ≈ 28 GB, plus room.
  need_gb=34
  free_gb=$(df -BG --output=avail "$swap" | tail -1 | tr -dc 0-9)
  if ((free_gb < need_gb)); then
    echo "{\"mode\": \"headline\", \"status\": \"skipped: $free_gb GB free in $swap, needs $need_gb GB\"}" >>"$results"
  else
    start=$SECONDS
    out=$(FATHOM_CPU_MEMORY_LIMIT_MB=2048 "$bench" step --stage 3 --offload nvme --param nvme --dir "$swap" --layers 48 \
            --width 1600 --heads 25 --vocab 50257 --block 128 --steps 1 --sub-group 10000000 --pipeline \
            --max-in-cpu 100000000 --buffer-size 100000000 --buffer-count 5 2>&1)
    # The peer: the largest GPT (768 wide) that trains at stage 3 without offload under the same cap.
    cap=2048 largest headline-none --stage 3 --offload none
    if grep -q '^RESULT ' <<<"$out"; then
      grep '^RESULT ' <<<"$out" | sed 's/^RESULT //; s/"mode": "step"/"mode": "headline", "status": "trained"/' >>"$results"
    else
      reason=$(grep -v '^$' <<<"$out" | tail -1 | cut -c1-400 | tr -d '"\\')
      echo "{\"mode\": \"headline\", \"status\": \"stopped after $((SECONDS - start)) s: $reason\"}" >>"$results"
    fi
  fi
fi

python3 benchmarks/offload/table.py "$results"
