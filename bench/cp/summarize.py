#!/usr/bin/env python3
"""bench/cp's table: per (part, exchange, cp), time and peak memory per rank
beside cp 1's, as ratios (memory goal ~ 1/cp).

    summarize.py RAW_CSV OUT_CSV
"""
import csv
import sys


def main(raw_path, out_path):
    rows = list(csv.DictReader(open(raw_path)))
    base = {r["part"]: r for r in rows if r["cp"] == "1"}
    table = []
    for r in rows:
        one = base.get(r["part"])
        ms, peak = float(r["step_ms"]), int(r["peak_bytes"])
        table.append({
            "part": r["part"], "exchange": r["exchange"], "cp": r["cp"], "seq": r["seq"],
            "ms": f"{ms:.1f}", "peak_mib": f"{peak / 2**20:.2f}",
            "time_vs_cp1": f"{ms / float(one['step_ms']):.2f}" if one else "",
            "memory_vs_cp1": f"{peak / int(one['peak_bytes']):.3f}" if one else "",
            "one_over_cp": f"{1 / int(r['cp']):.3f}",
        })
    with open(out_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    widths = {k: max(len(k), *(len(t[k]) for t in table)) for k in table[0]}
    print("  ".join(k.rjust(w) for k, w in widths.items()))
    for t in table:
        print("  ".join(t[k].rjust(w) for k, w in widths.items()))


if __name__ == "__main__":
    main(*sys.argv[1:3])
