"""Choosing a trained gate set for a target kept share, shared by the matched-memory recipes and the
leaderboard. `measure(spec)` runs kvc-eval kl on the training text with `--lowrank *spec` and returns its
report with "kept_share" added (kl_report does so). Two rate controls:
  alpha  the paper's (token-wise low rank, "DynaKV"): the hard-mask threshold stays at the τ the gates were
         trained with (kvc-train's --tau, 0.1 as in the paper), and the weight α of R² in the training loss
         sets the share. For a target share the gate set keeping the nearest share at its own τ is chosen
         (nearest_gate_set), or, with --train, α is bisected by training a gate set per probe
         (alpha_for_share).
  tau    kvc's: each gate set's τ is bisected until it keeps the share, and of those the gate set with the
         lowest KL on the training text is chosen (best_gate_set). The committed matched-memory tables and
         the leaderboard's gate rows were chosen this way.

As a command, prints the choice for each share that some gate set reaches, one line each: share, tab, the
--lowrank spec. For example
  python3 recipes/lib/matched_memory.py --rate tau --bin build/bin --model MODEL --text TRAIN.txt \
    --shares 0.5 0.3 --gates kl:1=gates.kl.1.safetensors kl:4=gates.kl.4.safetensors
  python3 recipes/lib/matched_memory.py --rate alpha --bin build/bin --model MODEL --text TRAIN.txt \
    --shares 0.3 --train "build/bin/kvc-train -m MODEL --bases bases.safetensors -f TRAIN.txt --loss kl \
    --steps 300 -c 128" --work build/recipe-work/alpha
"""
import math
import os
import shlex
import argparse
import json
import subprocess
import sys


def gguf_dtype(model):
    """A GGUF's weights dequantized to float32 at load: the arithmetic the committed results were measured with."""
    return ["--dtype", "float32"] if str(model).endswith(".gguf") else []


def kl_report(bin_dir, model, text, ctx, windows, threads, spec, chunk=64):
    """kvc-eval kl's --json report for the --lowrank arguments `spec` (a list), with "kept_share": the
    kept share of the low-rank layers' cache, from the measured bytes. Sliding-window layers keep their
    window as is and are left out of it. The compressed half of each window is fed `chunk` tokens a
    step: a low-rank cache compresses each entry as it is appended, so this equals 1 token a step."""
    cmd = [f"{bin_dir}/kvc-eval", "kl", "-m", str(model), *gguf_dtype(model), "-t", str(threads), "-f", str(text), "-c", str(ctx),
           "--max-windows", str(windows), "--chunk", str(chunk), "--lowrank", *spec, "--json"]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    window = r["reference_window_kv_bytes"]
    r["kept_share"] = (r["compressed_kv_bytes"] - window) / (r["reference_kv_bytes"] - window)
    return r


def tau_for_share(measure, gates, share, steps):
    """The tau at which `gates` keep `share` (bisected `steps` times), or None if no tau in
    [0.001, 0.999] does. A larger tau keeps less."""
    lo, hi = 0.001, 0.999
    if not measure([f"{gates}:tau={hi}"])["kept_share"] <= share <= measure([f"{gates}:tau={lo}"])["kept_share"]:
        return None
    for _ in range(steps):
        mid = (lo + hi) / 2
        if measure([f"{gates}:tau={mid}"])["kept_share"] > share:
            lo = mid
        else:
            hi = mid
    return round((lo + hi) / 2, 5)


def nearest_gate_set(measure, gate_sets, share, tolerance):
    """The paper's rate control over trained gate sets ({label: gates file}): each at its own τ (the one
    kvc-train recorded, 0.1 by default), the one whose kept share is nearest `share`, as {"label",
    "kept_share", "spec"}; None if none is within `tolerance` of it."""
    best = None
    for label, gates in gate_sets.items():
        kept = measure([gates])["kept_share"]
        if abs(kept - share) <= tolerance and (best is None or abs(kept - share) < abs(best["kept_share"] - share)):
            best = {"label": label, "kept_share": kept, "spec": [gates]}
    return best


def alpha_for_share(train, measure, share, lo, hi, steps, tolerance):
    """The paper's rate control with training: τ stays as trained, α is bisected in log space within [lo, hi]
    until the gate set `train(alpha)` (a gates file) keeps `share` within `tolerance`; a larger α keeps
    less. Returns {"alpha", "kept_share", "spec"} of that gate set (or of the nearest after `steps`
    probes), or None if [lo, hi] does not bracket the share."""
    probes = {}

    def kept(alpha):
        if alpha not in probes:
            gates = train(alpha)
            probes[alpha] = {"alpha": alpha, "kept_share": measure([gates])["kept_share"], "spec": [gates]}
        return probes[alpha]

    if not kept(hi)["kept_share"] - tolerance <= share <= kept(lo)["kept_share"] + tolerance:
        return None
    for _ in range(steps):
        nearest = min(probes.values(), key=lambda p: abs(p["kept_share"] - share))
        if abs(nearest["kept_share"] - share) <= tolerance:
            return nearest
        mid = math.sqrt(lo * hi)
        if kept(mid)["kept_share"] > share:
            lo = mid
        else:
            hi = mid
    return min(probes.values(), key=lambda p: abs(p["kept_share"] - share))


def best_gate_set(measure, gate_sets, share, steps):
    """Of `gate_sets` ({label: gates file}), the one with the lowest KL on the training text at the tau
    that keeps `share` there: {"label", "tau", "train_kl", "spec"}, or None if none reaches the share."""
    best = None
    for label, gates in gate_sets.items():
        tau = tau_for_share(measure, gates, share, steps)
        if tau is None:
            continue
        spec = [f"{gates}:tau={tau}"]
        fit = measure(spec)["kl"]
        if best is None or fit < best["train_kl"]:
            best = {"label": label, "tau": tau, "train_kl": fit, "spec": spec}
    return best


def table(rows, shares, methods):
    """Markdown lines of one matched-memory table: a row per target share, a column per method, each cell
    'KL / ppl (kept share)' from `rows` (dicts with target_share, method, kl, ppl, kept_share), or — where
    the method has no row at that share."""
    lines = ["| target share | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for share in shares:
        cells = []
        for method in methods:
            r = next((x for x in rows if x["target_share"] == share and x["method"] == method), None)
            cells.append("—" if r is None else f"{r['kl']:.3f} / {r['ppl']:.2f} ({r['kept_share']:.3f})")
        lines.append(f"| {share} | " + " | ".join(cells) + " |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="folder of kvc-eval")
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True, help="the gates' training text")
    ap.add_argument("--rate", choices=("alpha", "tau"), default="alpha",
                    help="alpha: the paper's (τ as trained, the gate set's α sets the share); tau: kvc's (τ bisected)")
    ap.add_argument("--gates", nargs="+", default=[], help="LABEL=FILE of each trained gate set")
    ap.add_argument("--train", help="--rate alpha: a kvc-train command without --alpha, -o and --json; α is then "
                    "bisected by training a gate set per probe into --work")
    ap.add_argument("--work", help="--train: the folder of the gate sets it trains (reused when there)")
    ap.add_argument("--alpha-range", nargs=2, type=float, default=[0.25, 64.0], metavar=("LO", "HI"))
    ap.add_argument("--tolerance", type=float, default=0.02, help="--rate alpha: how far from the share a kept "
                    "share may be")
    ap.add_argument("--shares", nargs="+", type=float, required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bisect", type=int, default=8, help="bisection steps of tau")
    a = ap.parse_args()
    if a.train and (a.rate != "alpha" or not a.work):
        ap.error("--train bisects α: give it with --rate alpha and --work")
    if not a.train and not a.gates:
        ap.error("give the trained gate sets (--gates) or, with --rate alpha, a --train command")
    gate_sets = dict(g.split("=", 1) for g in a.gates)
    measure = lambda spec: kl_report(a.bin, a.model, a.text, a.ctx, a.windows, a.threads, spec)

    def train(alpha):
        out = os.path.join(a.work, f"gates.alpha-{alpha:.6g}")
        if not os.path.exists(out + ".safetensors"):
            os.makedirs(a.work, exist_ok=True)
            with open(out + ".json", "w") as report:
                subprocess.run([*shlex.split(a.train), "--alpha", str(alpha), "-o", out + ".safetensors", "--json"],
                               check=True, stdout=report)
        return out + ".safetensors"

    for share in a.shares:
        if a.rate == "tau":
            best = best_gate_set(measure, gate_sets, share, a.bisect)
        elif a.train:
            best = alpha_for_share(train, measure, share, *a.alpha_range, a.bisect, a.tolerance)
        else:
            best = nearest_gate_set(measure, gate_sets, share, a.tolerance)
        if best is None:
            print(f"matched_memory.py: no gate set keeps {share} of the cache on {a.text}", file=sys.stderr)
            continue
        print(f"{share}\t{best['spec'][0]}", flush=True)


if __name__ == "__main__":
    main()
