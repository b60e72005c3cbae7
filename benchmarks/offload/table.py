"""Prints benchmarks/offload/run.sh's results (one JSON object per line) as one markdown table."""
import json
import re
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
by = lambda mode: [r for r in rows if r["mode"] == mode]


def dd_gbs(text):  # "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.52 s, 2.1 GB/s"
    match = re.search(r"([\d.]+) ([GMk])B/s", text)
    if not match:
        return float("nan")
    return float(match.group(1)) * {"G": 1, "M": 1e-3, "k": 1e-6}[match.group(2)]


print("| measurement | Fathom | peer | Fathom / peer |")
print("|---|---|---|---|")
adam = next(iter(by("adam")), None)  # absent when only the headline ran (run.sh --headline-only)
if adam:
    print(f"| CPU Adam, {adam['elements']} elements, {adam['threads']} threads | {adam['adam_gbs']:.2f} GB/s "
          f"({adam['adam_ms']:.1f} ms) | triad {adam['triad_gbs']:.2f} GB/s | {adam['adam_gbs'] / adam['triad_gbs']:.2f} |")
torch = by("torch_adam")
if adam and torch:
    best = min(torch, key=lambda r: r["adam_ms"])
    for r in sorted(torch, key=lambda r: (r["impl"], r["threads"])):
        print(f"| | | torch {r['version']} AdamW {r['impl']}, {r['threads']} thr: {r['adam_ms']:.1f} ms |"
              f" {r['adam_ms'] / adam['adam_ms']:.2f}x faster |")
    print(f"| CPU Adam with its bf16 copy vs PyTorch's best ({best['impl']}, {best['threads']} thr) | "
          f"{adam['adam_ms']:.1f} ms | {best['adam_ms']:.1f} ms | {best['adam_ms'] / adam['adam_ms']:.2f}x faster |")
    print(f"| CPU Adam without the copy (PyTorch's work) vs PyTorch's best | {adam['plain_ms']:.1f} ms | "
          f"{best['adam_ms']:.1f} ms | {best['adam_ms'] / adam['plain_ms']:.2f}x faster |")
dd = by("dd")[0]
write_peer, read_peer = dd_gbs(dd["write"]), dd_gbs(dd["read"])
for r in by("io"):
    setting = f"{r['backend']}, qd {r['queue_depth']}, {r['threads']} thr, {r['block_size'] >> 10} KiB"
    print(f"| swap write, {r['bytes'] >> 20} MiB ({setting}) | {r['write_gbs']:.2f} GB/s | dd O_DIRECT "
          f"{write_peer:.2f} GB/s | {r['write_gbs'] / write_peer:.2f} |")
    print(f"| swap read ({setting}) | {r['read_gbs']:.2f} GB/s | dd O_DIRECT {read_peer:.2f} GB/s | "
          f"{r['read_gbs'] / read_peer:.2f} |")
fio = {(r["engine"], r["rw"]): r["gbs"] for r in by("fio")}
for rw, peer in (("write", write_peer), ("read", read_peer)):
    if ("libaio", rw) in fio and ("io_uring", rw) in fio:
        print(f"| fio {rw}, qd 8, 1 MiB: io_uring vs libaio (DeepSpeed's) | {fio[('io_uring', rw)]:.2f} GB/s | "
              f"libaio {fio[('libaio', rw)]:.2f} GB/s | {fio[('io_uring', rw)] / fio[('libaio', rw)]:.2f} |")
steps = [r for r in by("step") if r.get("stage", 2) == 2]
for parameters in sorted({r["parameters"] for r in steps}):
    none = next(r for r in steps if r["parameters"] == parameters and r["offload"] == "none")
    for r in (r for r in steps if r["parameters"] == parameters):
        io = ""
        if r["offload"] == "nvme":
            hidden = 1 - r["io_wait_ms"] / max(r["optimizer_ms"], 1e-9)
            io = (f"; read {r['read_mb']:.0f} MB + wrote {r['written_mb']:.0f} MB per step, waited "
                  f"{r['io_wait_ms']:.0f} ms of the {r['optimizer_ms']:.0f} ms optimizer step ({hidden:.0%} hidden)")
        print(f"| GPT {parameters / 1e6:.1f}M stage 2, offload {r['offload']}: step (optimizer) | "
              f"{r['step_ms']:.0f} ms ({r['optimizer_ms']:.0f} ms), peak RSS {r['peak_rss_mib']:.0f} MiB, peak allocated "
              f"{r['peak_allocated_mib']:.0f} MiB{io} | offload none: {none['step_ms']:.0f} ms, RSS "
              f"{none['peak_rss_mib']:.0f} MiB, allocated {none['peak_allocated_mib']:.0f} MiB | "
              f"{none['step_ms'] / r['step_ms']:.2f} speed, {r['peak_allocated_mib'] / none['peak_allocated_mib']:.2f} "
              f"allocated |")
stage3 = [r for r in by("step") if r.get("stage") == 3]
plain3 = next((r for r in stage3 if r["offload"] == "none" and r["param"] == "none"), None)
for r in (r for r in stage3 if r["param"] == "nvme"):
    disk_s = r["read_mb"] / 1e3 / read_peer + r["written_mb"] / 1e3 / write_peer
    print(f"| GPT {r['parameters'] / 1e6:.1f}M stage 3, parameters and optimizer on nvme (ZeRO-Infinity): step | "
          f"{r['step_ms']:.0f} ms, read {r['read_mb']:.0f} MB + wrote {r['written_mb']:.0f} MB, waited "
          f"{r['io_wait_ms']:.0f} ms ({r['io_wait_ms'] / r['step_ms']:.0%} of the step), peak RSS "
          f"{r['peak_rss_mib']:.0f} MiB, allocated {r['peak_allocated_mib']:.0f} MiB | stage 3 without offload: "
          f"{plain3['step_ms']:.0f} ms, RSS {plain3['peak_rss_mib']:.0f} MiB, allocated "
          f"{plain3['peak_allocated_mib']:.0f} MiB | {plain3['step_ms'] / r['step_ms']:.2f} speed, "
          f"{r['peak_allocated_mib'] / plain3['peak_allocated_mib']:.2f} allocated |")
    print(f"| I/O efficiency: the step's bytes at dd's O_DIRECT rates / step time | {disk_s * 1e3:.0f} ms of disk "
          f"time | {r['step_ms']:.0f} ms step | {disk_s * 1e3 / r['step_ms']:.2f} |")
largest = {r["offload"]: r for r in by("largest")}
size = lambda layers: (12 * layers * 768 * 768 + (16384 + 128) * 768) / 1e6
if "none" in largest:
    n = largest["none"]
    for name, what in (("nvme", "optimizer on nvme"), ("infinity", "stage 3, parameters and optimizer on nvme")):
        if name not in largest:
            continue
        v = largest[name]
        print(f"| largest GPT (768 wide) under {n['cap_mib']} MiB per rank, {what} | {v['layers']} layers, "
              f"{size(v['layers']):.0f}M | no offload: {n['layers']} layers, {size(n['layers']):.0f}M | "
              f"{size(v['layers']) / max(size(n['layers']), 1e-9):.2f} |")
for r in by("headline"):
    if r["status"] != "trained":
        print(f"| headline: GPT-2 XL shape (1.56B) on one rank under 2 GiB, parameters and optimizer on nvme | "
              f"{r['status']} | | |")
        continue
    plain = largest.get("headline-none")
    peer = (f"largest at stage 3 without offload under the same cap: {plain['layers']} layers, "
            f"{size(plain['layers']):.0f}M" if plain else "")
    ratio = f"{r['parameters'] / 1e6 / size(plain['layers']):.1f}x the parameters" if plain and plain["layers"] else ""
    print(f"| headline: GPT-2 XL shape ({r['parameters'] / 1e9:.2f}B) on one rank under 2 GiB (model states "
          f"{16 * r['parameters'] / 2**31:.1f}x the cap), parameters and optimizer on nvme | {r['step_ms'] / 1e3:.1f} s "
          f"per step, read {r['read_mb'] / 1e3:.1f} GB + wrote {r['written_mb'] / 1e3:.1f} GB, waited "
          f"{r['io_wait_ms'] / r['step_ms']:.0%} of the step, peak RSS {r['peak_rss_mib']:.0f} MiB, allocated "
          f"{r['peak_allocated_mib']:.0f} MiB | {peer} | {ratio} |")
    disk_s = r["read_mb"] / 1e3 / read_peer + r["written_mb"] / 1e3 / write_peer
    print(f"| headline I/O efficiency: the step's bytes at dd's O_DIRECT rates / step time | {disk_s:.1f} s of disk "
          f"time | {r['step_ms'] / 1e3:.1f} s step | {disk_s * 1e3 / r['step_ms']:.2f} |")
