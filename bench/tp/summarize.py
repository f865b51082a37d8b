"""Summarizes bench/tp/run.sh: ours (bench_fsdp rows) beside PyTorch's
DTensor tensor parallelism (torch_tp.py rows), and ours' bytes per step
beside the Megatron formula. Writes the combined CSV and prints the tables.

    summarize.py OURS_RAW PEER_RAW BYTES_RAW OUT_CSV --n-layer L --n-embd E ... --batch B
"""
import csv
import statistics
import sys

ours = list(csv.DictReader(open(sys.argv[1])))
peer = list(csv.DictReader(open(sys.argv[2])))
sent = list(csv.DictReader(open(sys.argv[3])))
args = sys.argv[5:]
size = {args[i].lstrip("-"): int(args[i + 1]) for i in range(0, len(args), 2)}
MiB = 2 ** 20


def med(rows, col):
    return statistics.median(float(r[col]) for r in rows)


def of(rows, suffix):
    return [r for r in rows if r["label"].split("-", 1)[1] == suffix]


tps = sorted({int(r["tp"]) for r in ours if int(r["tp"]) > 1})
base = of(ours, "tp1")
base_state = med(base, "state_bytes")
base_act = med(base, "activation_bytes")
lines = ["tp,ours_ms,ours_sp_ms,torch_ms,torch_over_ours,ours_state_mib,ours_state_ratio,torch_state_mib,"
         "activation_mib,activation_ratio,activation_sp_mib,activation_sp_ratio"]
print(f"Llama (L {size['n-layer']}, width {size['n-embd']}, {size['n-head']}/{size['n-kv-head']} heads, "
      f"SwiGLU {size['intermediate']}, vocabulary {size['vocab']}, seq {size['seq-len']}, batch {size['batch']}), "
      f"fp32, one thread per rank; tp 1: step {med(base, 'step_ms'):.1f} ms, model state "
      f"{base_state / MiB:.1f} MiB, activations {base_act / MiB:.1f} MiB")
print(f"{'tp':>3}{'ours ms':>10}{'ours SP':>10}{'PyTorch':>10}{'theirs/ours':>13}"
      f"{'state MiB':>11}{'x tp1':>7}{'PyTorch':>9}{'act MiB':>9}{'x tp1':>7}{'SP act':>8}{'x tp1':>7}")
for tp in tps:
    o, s, p = of(ours, f"tp{tp}"), of(ours, f"tp{tp}-sp"), of(peer, f"tp{tp}")
    step, step_sp, step_p = med(o, "step_ms"), med(s, "step_ms"), med(p, "step_ms")
    state = med(o, "state_bytes")
    state_p = med(p, "param_bytes") + med(p, "grad_bytes") + med(p, "optimizer_bytes")
    act, act_sp = med(o, "activation_bytes"), med(s, "activation_bytes")
    lines.append(f"{tp},{step:.1f},{step_sp:.1f},{step_p:.1f},{step_p / step:.2f},{state / MiB:.1f},"
                 f"{state / base_state:.3f},{state_p / MiB:.1f},{act / MiB:.1f},{act / base_act:.3f},"
                 f"{act_sp / MiB:.1f},{act_sp / base_act:.3f}")
    print(f"{tp:>3}{step:10.1f}{step_sp:10.1f}{step_p:10.1f}{step_p / step:12.2f}x"
          f"{state / MiB:11.1f}{state / base_state:7.3f}{state_p / MiB:9.1f}"
          f"{act / MiB:9.1f}{act / base_act:7.3f}{act_sp / MiB:8.1f}{act_sp / base_act:7.3f}")
print("theirs/ours: PyTorch's step time over ours (goal >= 1.0); x tp1: the fraction of tp 1's (goal ~ 1/tp)")

# Megatron (Narayanan et al. 2021; Korthikanti et al. 2022): per layer two
# all-reduces of B·T·E activations forward and two backward, plus the
# embedding's forward and the head input's backward; sequence parallelism
# replaces each by an all-gather and a reduce-scatter of the same volume.
# A ring all-reduce sends 2(t-1)/t of the payload per rank.
payload = size["batch"] * size["seq-len"] * size["n-embd"] * 4
collectives = 4 * size["n-layer"] + 2
print(f"\nBytes sent per step and rank ({collectives} all-reduces of B·T·E fp32 = {payload / MiB:.2f} MiB each):")
print(f"{'tp':>3}{'SP':>7}{'measured MiB':>14}{'formula MiB':>13}{'measured/formula':>18}")
for row in sent:
    tp = int(row["tp"])
    formula = collectives * payload * 2 * (tp - 1) / tp
    measured = float(row["bytes_per_step"])
    print(f"{tp:>3}{row['sequence_parallel']:>7}{measured / MiB:14.2f}{formula / MiB:13.2f}{measured / formula:18.2f}")
with open(sys.argv[4], "w") as f:
    f.write("\n".join(lines) + "\n")
