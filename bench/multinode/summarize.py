"""Summarises bench/multinode (run.sh): per link and layout, each
configuration's median step time, the bytes per step that crossed the hosts'
links, our speed-up over PyTorch DDP (gloo, fp32) and the weak scaling
against one host.

    summarize.py RAW_CSV BYTES_CSV OUT_CSV [--note TEXT]

- step ms: the median over every timed step of both runs (the step is the
  slowest rank's).
- link MB/step: (bytes of the long run - bytes of the short run) / (the
  difference in steps), summed over both hosts' links, one direction (what
  the bridge delivered into the hosts): the start-up's traffic cancels out.
- vs torch: PyTorch DDP's (fp32) median step time over ours at the same link
  and layout (> 1: ours is faster).
- vs peer hook: the same against PyTorch with the matching hook: ours-powersgd
  against torch-powersgd, ours-hier-bf16 against torch-fp16 (16 bits on the
  wire; torch's bf16 hook needs CUDA).
- weak scaling: T(the same ranks per host on one host) / T(2 hosts), for
  ours against ours on one host and torch against torch. Both hosts share
  this machine's cores, so a 2-host run also has twice the ranks per core of
  the one-host run it is compared with: the figure counts that against us.
Standard library only.
"""
import argparse
import csv
import statistics
from collections import defaultdict


PEER_HOOK = {"ours-powersgd": "torch-powersgd", "ours-hier-bf16": "torch-fp16"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("bytes")
    parser.add_argument("out")
    parser.add_argument("--note", default="")
    args = parser.parse_args()

    steps = defaultdict(list)
    for row in csv.DictReader(open(args.raw)):
        steps[(row["link"], row["layout"], row["impl"])].append(float(row["step_ms"]))
    runs = defaultdict(dict)
    for row in csv.DictReader(open(args.bytes)):
        runs[(row["link"], row["layout"], row["impl"])][int(row["iters"])] = int(row["bytes"])

    def median(key):
        return statistics.median(steps[key]) if steps.get(key) else None

    def per_step(key):
        r = runs.get(key, {})
        if len(r) < 2:
            return None
        (n1, b1), (n2, b2) = sorted(r.items())
        return (b2 - b1) / (n2 - n1)

    print(f"DDP across 2 hosts of the cluster in a box ({args.note})")
    header = (f"{'link':<14}{'layout':<8}{'impl':<16}{'step ms':>9}{'link MB/step':>14}{'vs torch':>10}"
              f"{'vs peer hook':>14}{'weak scaling':>14}")
    print(header)
    rows = []
    for key in sorted(steps, key=lambda k: (k[0], k[1], k[2])):
        link, layout, impl = key
        t = median(key)
        b = per_step(key)
        torch_t = median((link, layout, "torch"))
        speedup = torch_t / t if torch_t and not impl.startswith("torch") else None
        peer = PEER_HOOK.get(impl)
        peer_t = median((link, layout, peer)) if peer else None
        hook_speedup = peer_t / t if peer_t else None
        weak = None
        if layout.startswith("2x"):
            one = median((link, "1x" + layout[2:], "torch" if impl.startswith("torch") else "ours"))
            weak = one / t if one else None
        fmt = lambda v, f: (f % v) if v is not None else "-"
        print(f"{link:<14}{layout:<8}{impl:<16}{t:>9.1f}{fmt(b / 1e6 if b is not None else None, '%.2f'):>14}"
              f"{fmt(speedup, '%.2fx'):>10}{fmt(hook_speedup, '%.2fx'):>14}{fmt(weak, '%.2f'):>14}")
        rows.append([link, layout, impl, f"{t:.3f}", "" if b is None else f"{b:.0f}",
                     "" if speedup is None else f"{speedup:.3f}",
                     "" if hook_speedup is None else f"{hook_speedup:.3f}", "" if weak is None else f"{weak:.3f}"])
    with open(args.out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["link", "layout", "impl", "step_ms", "link_bytes_per_step", "speedup_vs_torch",
                         "speedup_vs_peer_hook", "weak_scaling"])
        writer.writerows(rows)
    print(f"(CSV: {args.out})")


if __name__ == "__main__":
    main()
