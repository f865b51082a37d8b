#!/usr/bin/env python3
"""bench/pp's table: per (pp, schedule), ours beside torch.distributed.pipelining
(the better of the rounds), theirs/ours (goal >= 1.0), and ours' measured
bubble beside the schedule's theory.

    summarize.py RAW_CSV OUT_CSV
"""
import csv
import sys


def best(rows):
    """The round with the fastest step, per (impl, pp, schedule)."""
    kept = {}
    for r in rows:
        key = (r["impl"], int(r["pp"]), r["schedule"])
        if key not in kept or float(r["step_ms"]) < float(kept[key]["step_ms"]):
            kept[key] = r
    return kept


def main(raw_path, out_path):
    kept = best(csv.DictReader(open(raw_path)))
    table = []
    for (impl, pp, schedule), r in sorted(kept.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if impl != "ours":
            continue
        theirs = kept.get(("torch", pp, schedule))
        ours_ms = float(r["step_ms"])
        torch_ms = float(theirs["step_ms"]) if theirs else None
        table.append({
            "pp": pp, "schedule": schedule, "microbatches": r["microbatches"],
            "ours_ms": f"{ours_ms:.1f}", "torch_ms": f"{torch_ms:.1f}" if torch_ms else "",
            "theirs_over_ours": f"{torch_ms / ours_ms:.2f}" if torch_ms else "",
            "bubble": r["bubble"], "theory": r["theory"],
        })
    with open(out_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    print("| pp | schedule | m | ours ms | torch.distributed.pipelining ms | theirs/ours | bubble | theory |")
    print("|---|---|---|---|---|---|---|---|")
    for t in table:
        print(f"| {t['pp']} | {t['schedule']} | {t['microbatches']} | {t['ours_ms']} | {t['torch_ms'] or '—'} | "
              f"{t['theirs_over_ours'] or '—'} | {t['bubble']} | {t['theory']} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
