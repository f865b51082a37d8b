"""Summary of bench/eager: our single-process step (bench_fsdp rows) beside
PyTorch eager's (torch_eager.py rows), per precision; each figure is the
median over rounds of a run's median step. "fused / ours" is PyTorch's
fused-AdamW time over ours: above 1.0 ours is faster.

    summarize.py OURS_RAW TORCH_RAW OUT_CSV [--note TEXT]
"""
import argparse
import csv
import statistics
from collections import defaultdict

PHASES = ["step_ms", "forward_ms", "backward_ms", "optimizer_ms"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ours")
    p.add_argument("torch")
    p.add_argument("out")
    p.add_argument("--note", default="")
    a = p.parse_args()
    runs = defaultdict(list)  # (precision, impl) -> rows
    for row in csv.DictReader(open(a.ours)):
        runs[(row["label"].removeprefix("ours_"), "ours")].append(row)
    for row in csv.DictReader(open(a.torch)):
        runs[(row["precision"], row["impl"])].append(row)
    table = {key: {ph: statistics.median(float(r[ph]) for r in rows) for ph in PHASES}
             for key, rows in runs.items()}
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["precision", "impl", "runs"] + PHASES + ["fused_over_ours_step"])
        print(f"bench/eager: the bundled GPT, one process ({a.note})")
        print(f"{'precision':<9} {'implementation':<28} {'step':>7} {'forward':>8} {'backward':>9} "
              f"{'optimizer':>10} {'fused / ours':>13}")
        for precision in sorted({k[0] for k in table}):
            fused = table.get((precision, "torch_fused"))
            for impl, name in [("ours", "mpiaccel (strategy no)"), ("torch_default", "PyTorch eager, AdamW"),
                               ("torch_fused", "PyTorch eager, AdamW fused")]:
                t = table.get((precision, impl))
                if t is None:
                    continue
                ratio = fused["step_ms"] / t["step_ms"] if fused else float("nan")
                w.writerow([precision, impl, len(runs[(precision, impl)])] + [f"{t[ph]:.1f}" for ph in PHASES]
                           + [f"{ratio:.3f}"])
                print(f"{precision:<9} {name:<28} {t['step_ms']:7.1f} {t['forward_ms']:8.1f} "
                      f"{t['backward_ms']:9.1f} {t['optimizer_ms']:10.1f} {ratio:12.2f}x")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
