"""Reads the Chrome traces of async.sh's `mpiaccel train` runs and prints our
row of the asynchronous-checkpoint table (the peer's row comes from
dcp_gpt.py in the same run).

    summarize_async.py NP SYNC_TRACE ASYNC_TRACE

A step's time is the distance between consecutive `forward` starts on a rank
(grad_accum_steps = 1). The stall is the `checkpoint save` span of the saves after the first (the
first is reported apart: it faults in fresh staging memory) (the whole
save when synchronous, the snapshot when asynchronous); the background write
is the `checkpoint write (background)` span. Normal steps touch neither (the
first two are warm-up); steps during the write overlap the background span
and not a stall. Each figure is the max over ranks.
"""
import json
import statistics
import sys


def spans(path):
    with open(path) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    by_rank = {}
    for e in events:
        if e.get("ph") == "X":
            by_rank.setdefault(e["pid"], []).append((e["name"], e["ts"] / 1e6, e["dur"] / 1e6))
    return by_rank


def rank_figures(events):
    forwards = sorted(t for name, t, _ in events if name == "forward")
    stalls = [(t, t + d) for name, t, d in events if name == "checkpoint save"]
    writes = [(t, t + d) for name, t, d in events if name == "checkpoint write (background)"]
    overlaps = lambda a, b, spans: any(s < b and a < e for s, e in spans)
    normal, during = [], []
    for a, b in zip(forwards[2:], forwards[3:]):
        if overlaps(a, b, stalls):
            continue
        (during if overlaps(a, b, writes) else normal).append(b - a)
    # Only saves followed by steps count (the last is the end of the run's).
    # The first fills fresh staging memory (a page fault per page on this VM);
    # later ones reuse it: the steady state a long run sees.
    counted = [e - s for s, e in sorted(stalls) if forwards and s < forwards[-1]]
    return {
        "first_stall": counted[0] if counted else float("nan"),
        "stall": statistics.median(counted[1:]) if len(counted) > 1 else float("nan"),
        "normal": statistics.median(normal) if normal else float("nan"),
        "during": statistics.mean(during) if during else float("nan"),
        "steps_during": len(during),
        "write": max((e - s for s, e in writes), default=float("nan")),
    }


def worst(path):
    figures = [rank_figures(events) for events in spans(path).values()]
    return {key: max(f[key] for f in figures) for key in figures[0]}


def main():
    np_, sync_path, async_path = sys.argv[1:4]
    sync, asyn = worst(sync_path), worst(async_path)
    slowdown = asyn["during"] / asyn["normal"] if asyn["steps_during"] else float("nan")
    print("ours np=%s sync_save_s=%.3f async_stall_s=%.3f (first %.3f) normal_step_s=%.3f "
          "steps_during_write=%d during_step_s=%.3f slowdown=%.2f async_write_s=%.3f "
          "stall_ratio=%.3f"
          % (np_, sync["stall"], asyn["stall"], asyn["first_stall"], asyn["normal"],
             asyn["steps_during"], asyn["during"], slowdown, asyn["write"],
             asyn["stall"] / sync["stall"]))


if __name__ == "__main__":
    main()
