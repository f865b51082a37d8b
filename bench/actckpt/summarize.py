#!/usr/bin/env python3
"""Pairs bench_actckpt's runs (checkpointing off / on) into the table
config | strategy | np | ckpt off: ms, MiB | ckpt on: ms, MiB | memory ratio | time ratio
and writes it as CSV. With --peer, adds PyTorch's torch.utils.checkpoint rows
(peer.py) for the same configs at one process. With several rounds, each
figure is the median over rounds.

    summarize.py RAW_CSV OUT_CSV [--peer PEER_CSV] [--note TEXT]
"""
import argparse
import csv
import statistics
from collections import defaultdict

MIB = 1024.0 * 1024.0


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("raw")
    p.add_argument("out")
    p.add_argument("--peer")
    p.add_argument("--note", default="")
    a = p.parse_args()

    runs = defaultdict(lambda: defaultdict(list))  # (config, strategy, np) -> ckpt -> [(ms, peak, kept)]
    meta = {}
    for r in rows_of(a.raw):
        key = (r["label"], r["strategy"], int(r["ranks"]))
        runs[key][int(r["checkpointing"])].append(
            (float(r["step_ms"]), int(r["peak_bytes"]), int(r["kept_bytes"])))
        meta[r["label"]] = "L=%s C=%s T=%s B=%s, %s params" % (
            r["n_layer"], r["n_embd"], r["seq_len"], r["batch"], r["params"])
    if a.peer:
        for r in rows_of(a.peer):
            key = (r["label"], "torch (peer)", 1)
            runs[key][int(r["checkpointing"])].append(
                (float(r["step_ms"]), int(r["peak_bytes"]), int(r["kept_bytes"])))

    def med(values, i):
        return statistics.median(v[i] for v in values)

    table = []
    for key in sorted(runs, key=lambda k: (k[0], k[1] == "torch (peer)", k[1], k[2])):
        off, on = runs[key].get(0), runs[key].get(1)
        if not off or not on:
            continue
        row = {
            "config": key[0], "strategy": key[1], "np": key[2],
            "off_ms": med(off, 0), "off_peak_mib": med(off, 1) / MIB, "off_kept_mib": med(off, 2) / MIB,
            "on_ms": med(on, 0), "on_peak_mib": med(on, 1) / MIB, "on_kept_mib": med(on, 2) / MIB,
        }
        row["memory_ratio"] = row["on_peak_mib"] / row["off_peak_mib"] if row["off_peak_mib"] else float("nan")
        row["time_ratio"] = row["on_ms"] / row["off_ms"] if row["off_ms"] else float("nan")
        table.append(row)

    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0].keys()) if table else ["config"])
        w.writeheader()
        for row in table:
            w.writerow({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})

    print("Activation checkpointing: step time (median, slowest rank) and peak memory allocated during "
          "forward + backward above the model states (max over ranks)")
    for label, text in sorted(meta.items()):
        print("  %s: %s" % (label, text))
    header = "| config | strategy | np | ckpt off: ms, MiB | ckpt on: ms, MiB | memory ratio | time ratio |"
    print(header)
    print("|" + "|".join("---" for _ in range(7)) + "|")
    for r in table:
        print("| %s | %s | %d | %.1f ms, %.2f MiB | %.1f ms, %.2f MiB | %.2f | %.2f |" % (
            r["config"], r["strategy"], r["np"], r["off_ms"], r["off_peak_mib"], r["on_ms"],
            r["on_peak_mib"], r["memory_ratio"], r["time_ratio"]))
    print("kept for backward when forward returns (MiB, off -> on): " + "; ".join(
        "%s %s np %d: %.2f -> %.2f" % (r["config"], r["strategy"], r["np"], r["off_kept_mib"], r["on_kept_mib"])
        for r in table))
    if a.note:
        print(a.note)


if __name__ == "__main__":
    main()
