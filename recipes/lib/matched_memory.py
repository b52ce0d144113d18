"""Choosing a trained gate set and its threshold for a target kept share, shared by the matched-memory
recipes and the leaderboard. `measure(spec)` runs kvc-eval kl on the training text with `--lowrank *spec`
and returns its report with "kept_share" added (kl_report does so).

As a command, prints the gate set and tau chosen for each share that some gate set reaches, one line
each: share, tab, the --lowrank spec. For example
  python3 recipes/lib/matched_memory.py --bin build/bin --model MODEL --text TRAIN.txt --shares 0.5 0.3 \
    --gates kl:1=gates.kl.1.safetensors kl:4=gates.kl.4.safetensors
"""
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
    ap.add_argument("--gates", nargs="+", required=True, help="LABEL=FILE of each trained gate set")
    ap.add_argument("--shares", nargs="+", type=float, required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bisect", type=int, default=8, help="bisection steps of tau")
    a = ap.parse_args()
    gate_sets = dict(g.split("=", 1) for g in a.gates)
    measure = lambda spec: kl_report(a.bin, a.model, a.text, a.ctx, a.windows, a.threads, spec)
    for share in a.shares:
        best = best_gate_set(measure, gate_sets, share, a.bisect)
        if best is None:
            print(f"matched_memory.py: no gate set keeps {share} of the cache on {a.text}", file=sys.stderr)
            continue
        print(f"{share}\t{best['spec'][0]}", flush=True)


if __name__ == "__main__":
    main()
