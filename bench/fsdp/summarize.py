"""Summarises the strategy benchmark's runs (fsdp_raw.csv, one row per
bench_fsdp run) into a table on stdout and a CSV.

    summarize.py RAW_CSV OUT_CSV [--note TEXT]

For each (label, ranks): the median over rounds of each run's median step
time, and the largest model-state and RSS figures. Derived, at the same
number of ranks:
  step/DDP    = step time over DDP's,
  state/form  = per-rank model-state bytes (Strategy::memory(), peak of the
                samples, max over ranks) over the ZeRO formula for fp32
                params and grads and AdamW's two fp32 moments (P = parameters,
                N = ranks; DDP 16P, ZeRO-1 4P+4P+8P/N, ZeRO-2 4P+12P/N,
                ZeRO-3/FSDP 16P/N + the largest unit gathered),
  state/DDP   = model-state bytes over DDP's,
  RSS         = peak resident set (getrusage ru_maxrss), max over ranks.
Then the issue's goals against these figures, and ours beside PyTorch's DDP
and FSDP2 (torch_peer.py rows: times and RSS only; their model-state
columns are 0, torch keeps no such account). A benchmark reports; it does
not fail on timing. Standard library only.
"""

import argparse
import csv
import statistics
import sys
from collections import defaultdict

MIB = 1 << 20
ORDER = ["no", "ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp_keep", "zero2_offload", "torch_ddp", "torch_fsdp"]
NAMES = {
    "no": "no (one process)",
    "ddp": "DDP",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "zero3": "ZeRO-3",
    "fsdp": "FSDP (DecoderLayer)",
    "fsdp_keep": "FSDP no reshard",
    "zero2_offload": "ZeRO-2 offload",
    "torch_ddp": "torch DDP (gloo)",
    "torch_fsdp": "torch FSDP2 (gloo)",
}
# Ours beside PyTorch's own, at the same number of ranks: (ours, peer).
PEERS = [("ddp", "torch_ddp"), ("fsdp", "torch_fsdp")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("out")
    parser.add_argument("--note", default="")
    args = parser.parse_args()

    groups = defaultdict(list)
    with open(args.raw) as f:
        for row in csv.DictReader(f):
            groups[(row["label"], int(row["ranks"]))].append(row)
    if not groups:
        sys.exit("summarize.py: %s has no rows: did every run fail?" % args.raw)

    summary = {}
    for (label, ranks), rows in groups.items():
        def med(name):
            return statistics.median(float(r[name]) for r in rows)

        def top(name):
            return max(float(r[name]) for r in rows)

        s = {
            "label": label,
            "strategy": rows[0]["strategy"],
            "ranks": ranks,
            "params": int(rows[0]["params"]),
            "runs": len(rows),
            "formula": rows[0]["formula"],
        }
        for name in ("step_ms", "forward_ms", "backward_ms", "optimizer_ms", "cpu_ms"):
            s[name] = med(name)
        for name in ("param_bytes", "grad_bytes", "optimizer_bytes", "state_bytes",
                     "formula_bytes", "largest_unit_bytes", "warmup_state_bytes", "peak_rss_bytes"):
            s[name] = top(name)
        summary[(label, ranks)] = s

    def ratio(a, b):
        return a / b if b else float("nan")

    for (label, ranks), s in summary.items():
        ddp = summary.get(("ddp", ranks))
        s["step_vs_ddp"] = ratio(s["step_ms"], ddp["step_ms"]) if ddp else float("nan")
        s["state_vs_ddp"] = ratio(s["state_bytes"], ddp["state_bytes"]) if ddp else float("nan")
        s["rss_vs_ddp"] = ratio(s["peak_rss_bytes"], ddp["peak_rss_bytes"]) if ddp else float("nan")
        s["state_vs_formula"] = ratio(s["state_bytes"], s["formula_bytes"])

    def key(item):
        label, ranks = item
        return (ranks, ORDER.index(label) if label in ORDER else len(ORDER), label)

    keys = sorted(summary, key=key)
    columns = ["label", "strategy", "ranks", "params", "runs", "step_ms", "step_vs_ddp",
               "forward_ms", "backward_ms", "optimizer_ms", "cpu_ms", "param_bytes",
               "grad_bytes", "optimizer_bytes", "state_bytes", "formula", "formula_bytes",
               "state_vs_formula", "state_vs_ddp", "largest_unit_bytes", "warmup_state_bytes", "peak_rss_bytes",
               "rss_vs_ddp"]
    with open(args.out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for k in keys:
            s = summary[k]
            writer.writerow([("%.4f" % s[c]) if isinstance(s[c], float) and c.startswith(("step_vs", "state_vs", "rss_vs"))
                             else ("%.1f" % s[c]) if isinstance(s[c], float) and c.endswith("_ms")
                             else ("%d" % s[c]) if isinstance(s[c], float) else s[c] for c in columns])

    params = summary[keys[0]]["params"]
    print("Strategy benchmark: GPT, %.1fM parameters (P), fp32, AdamW; per rank" % (params / 1e6))
    if args.note:
        print("(" + args.note + ")")
    header = ("%-20s %2s %7s %6s %5s %5s %5s %5s | %6s %6s %6s %6s %-22s %7s %5s %5s %7s | %6s %5s"
              % ("strategy", "np", "step", "/DDP", "fwd", "bwd", "opt", "cpu", "param", "grad",
                 "optim", "state", "formula (fp32+AdamW)", "formula", "/form", "/DDP",
                 "warmup", "RSS", "/DDP"))
    print(header)
    print("%-20s %2s %7s %6s %5s %5s %5s %5s | %6s %6s %6s %6s %-22s %7s %5s %5s %7s | %6s %5s"
          % ("", "", "ms", "", "ms", "ms", "ms", "ms", "MiB", "MiB", "MiB", "MiB", "", "MiB", "",
             "", "MiB", "MiB", ""))
    print("-" * len(header))
    last_ranks = None
    for k in keys:
        s = summary[k]
        if last_ranks is not None and s["ranks"] != last_ranks:
            print()
        last_ranks = s["ranks"]
        times = ("%-20s %2d %7.0f %5.2fx %5.0f %5.0f %5.0f %5.0f"
                 % (NAMES.get(s["label"], s["label"]), s["ranks"], s["step_ms"], s["step_vs_ddp"],
                    s["forward_ms"], s["backward_ms"], s["optimizer_ms"], s["cpu_ms"]))
        if s["state_bytes"] > 0:
            state = ("%6.1f %6.1f %6.1f %6.1f %-22s %7.1f %5.2f %5.3f %7.1f"
                     % (s["param_bytes"] / MIB, s["grad_bytes"] / MIB, s["optimizer_bytes"] / MIB,
                        s["state_bytes"] / MIB, s["formula"], s["formula_bytes"] / MIB,
                        s["state_vs_formula"], s["state_vs_ddp"], s["warmup_state_bytes"] / MIB))
        else:  # a peer: no model-state account
            state = "%6s %6s %6s %6s %-22s %7s %5s %5s %7s" % (("-",) * 9)
        print("%s | %s | %6.0f %5.2f" % (times, state, s["peak_rss_bytes"] / MIB, s["rss_vs_ddp"]))
    print("step: median over timed steps of the slowest rank; cpu: process CPU time per step "
          "(all threads), mean over ranks. state: peak of Strategy::memory() in the timed "
          "steps; warmup: its peak in the warmup steps (FSDP holds units gathered until their "
          "first forward). formula: P = parameters, N = ranks, unit = largest unit's full "
          "bytes (gathered around its forward/backward); ZeRO-2 offload adds the host master "
          "and gradient rows (8P/N); FSDP no reshard keeps every unit gathered from forward "
          "to backward.")

    goals = []
    fsdp2 = summary.get(("fsdp", 2))
    if fsdp2 and ("ddp", 2) in summary:
        goals.append(("FSDP step time at np 2 <= 1.25x DDP", fsdp2["step_vs_ddp"], 1.25))
    for label in ("zero3", "fsdp"):
        s = summary.get((label, 4))
        if s and ("ddp", 4) in summary:
            goals.append(("%s model state at np 4 <= 0.3x DDP" % NAMES[label], s["state_vs_ddp"], 0.3))
    for text, value, limit in goals:
        print("goal: %-44s %6.3f  %s" % (text, value, "met" if value <= limit else "NOT met"))
    # One rank: every strategy at least 0.97x as fast as one process (speed = no's time / its time).
    alone = summary.get(("no", 1))
    if alone:
        for label in ORDER:
            s = summary.get((label, 1))
            if s and label != "no" and not label.startswith("torch_"):
                speed = alone["step_ms"] / s["step_ms"]
                print("goal: %-44s %6.3f  %s" % ("%s at np 1 >= 0.97x strategy = no" % NAMES[label], speed,
                                                 "met" if speed >= 0.97 else "NOT met"))
    for ours, peer in PEERS:
        for ranks in sorted({r for _, r in summary}):
            a, b = summary.get((ours, ranks)), summary.get((peer, ranks))
            if a and b:
                print("ours vs PyTorch: %s np %d: step %.0f vs %.0f ms (%.2fx), optimizer %.0f vs %.0f ms"
                      % (NAMES[ours], ranks, a["step_ms"], b["step_ms"], b["step_ms"] / a["step_ms"],
                         a["optimizer_ms"], b["optimizer_ms"]))
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
