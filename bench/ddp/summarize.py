"""Summarises the DDP benchmark's per-step rows (ddp_raw.csv, written by
bench_ddp and torch_ddp.py) into a table on stdout and a CSV.

    summarize.py RAW_CSV OUT_CSV [--note TEXT]

For each (impl, ranks): the median step time over all timed steps of all
rounds, its 10th/90th percentiles, the spread of the per-round medians, and
the median forward / backward (including the wait for the gradients'
all-reduce) / optimizer (step + zero_grad) times. Derived:
  efficiency    = T(1 rank) / T(2 ranks) of the same impl (weak scaling:
                  the batch per rank is fixed),
  torch / ours  = PyTorch DDP's median step time over ours at the same ranks,
  hidden        = sum of all-reduce time that ran before backward ended over
                  the sum of all all-reduce time (ours only; see bench_ddp.cpp),
  exposed       = mean time from backward end to the last bucket done,
  cpu           = median CPU time per step of one rank's process (all its
                  threads): the work a step costs, less sensitive than wall
                  time to other jobs on a shared machine,
  ceiling       = T(ours, 1 rank) / T(solo): "solo" rows come from two
                  single-rank runs at once with no communication (run.sh), so
                  this is the best weak scaling the machine allows,
  comm kept     = T(solo) / T(ours, 2 ranks): the share of that ceiling our
                  communication keeps.
Standard library only.
"""

import argparse
import csv
import statistics
import sys
from collections import defaultdict


def percentile(values, q):
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("out")
    parser.add_argument("--note", default="")
    args = parser.parse_args()

    groups = defaultdict(list)
    with open(args.raw) as f:
        for row in csv.DictReader(f):
            groups[(row["impl"], int(row["ranks"]))].append(row)
    if not groups:
        sys.exit("summarize.py: %s has no rows: did every run fail?" % args.raw)

    def column(rows, name):
        return [float(r[name]) for r in rows if r[name] != ""]

    summary = {}
    for key, rows in groups.items():
        steps = column(rows, "step_ms")
        rounds = defaultdict(list)
        for r in rows:
            rounds[r["round"]].append(float(r["step_ms"]))
        round_medians = [statistics.median(v) for v in rounds.values()]
        # Single-rank runs exchange nothing: no all-reduce figures.
        comm = column(rows, "comm_ms") if key[1] > 1 else []
        s = {
            "impl": key[0],
            "ranks": key[1],
            "steps": len(steps),
            "median_ms": statistics.median(steps),
            "p10_ms": percentile(steps, 0.1),
            "p90_ms": percentile(steps, 0.9),
            "round_median_min_ms": min(round_medians),
            "round_median_max_ms": max(round_medians),
            "forward_ms": statistics.median(column(rows, "forward_ms")),
            "backward_ms": statistics.median(column(rows, "backward_ms")),
            "optimizer_ms": statistics.median(column(rows, "optimizer_ms")),
            "cpu_ms": statistics.median(column(rows, "cpu_ms")),
            "comm_ms": statistics.mean(comm) if comm else None,
            "hidden_frac": (sum(column(rows, "hidden_ms")) / sum(comm))
            if comm and sum(comm) > 0 else None,
            "exposed_ms": statistics.mean(column(rows, "exposed_ms")) if comm else None,
        }
        summary[key] = s
    for (impl, ranks), s in summary.items():
        one = summary.get((impl, 1))
        s["efficiency"] = one["median_ms"] / s["median_ms"] if one and ranks != 1 else None
        peer = summary.get(("torch", ranks))
        s["torch_over_ours"] = (peer["median_ms"] / s["median_ms"]
                                if impl == "ours" and peer else None)

    fields = ["impl", "ranks", "steps", "median_ms", "p10_ms", "p90_ms", "round_median_min_ms",
              "round_median_max_ms", "forward_ms", "backward_ms", "optimizer_ms", "cpu_ms", "comm_ms",
              "hidden_frac", "exposed_ms", "efficiency", "torch_over_ours"]
    keys = sorted(summary, key=lambda k: ({"ours": 0, "solo": 1}.get(k[0], 2), k[1]))

    def text(value, fmt):
        return "-" if value is None else fmt % value

    with open(args.out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(fields)
        for k in keys:
            writer.writerow(["" if summary[k][n] is None else
                             (("%.4f" % summary[k][n]) if isinstance(summary[k][n], float)
                              else summary[k][n]) for n in fields])

    print()
    print("DDP step time: 4 x (Linear 512->2048, GELU, Linear 2048->512), batch 32 per rank,"
          " MSE, 1 torch thread per rank")
    if args.note:
        print(args.note)
    header = ("%-6s %5s %5s %9s %17s %15s %8s %8s %8s %8s %8s %7s %9s %6s %8s"
              % ("impl", "ranks", "steps", "median", "p10-p90", "round medians", "fwd",
                 "bwd+wait", "optim", "cpu", "allred", "hidden", "exposed", "T1/T2", "torch/us"))
    print(header)
    print("-" * len(header))
    for k in keys:
        s = summary[k]
        ranks = "2x1" if s["impl"] == "solo" else str(s["ranks"])
        print("%-6s %5s %5d %7.1fms %7.1f-%7.1fms %6.1f-%6.1fms %6.1fms %6.1fms %6.1fms %6.1fms %8s %7s %9s %6s %8s"
              % (s["impl"], ranks, s["steps"], s["median_ms"], s["p10_ms"], s["p90_ms"],
                 s["round_median_min_ms"], s["round_median_max_ms"], s["forward_ms"],
                 s["backward_ms"], s["optimizer_ms"], s["cpu_ms"], text(s["comm_ms"], "%.1fms"),
                 text(s["hidden_frac"] and 100 * s["hidden_frac"], "%.0f%%"),
                 text(s["exposed_ms"], "%.1fms"), text(s["efficiency"], "%.2f"),
                 text(s["torch_over_ours"], "%.2fx")))
    print("cpu = one rank's CPU time per step (all threads); allred = summed bucket all-reduce"
          " time; hidden = its share run before")
    print("backward ended; exposed = backward end -> last bucket done (ours only).")
    print("T1/T2 = weak-scaling efficiency; torch/us = PyTorch DDP step time / ours."
          " CSV: %s" % args.out)
    one, two, solo = summary.get(("ours", 1)), summary.get(("ours", 2)), summary.get(("solo", 1))
    if one and two and solo:
        print("solo = two single-rank runs at once, no communication: ceiling T1/T(solo) = %.2f is"
              " the best weak scaling this machine allows; ours keeps T(solo)/T2 = %.2f of it."
              % (one["median_ms"] / solo["median_ms"], solo["median_ms"] / two["median_ms"]))


if __name__ == "__main__":
    main()
