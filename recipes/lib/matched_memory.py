"""Choosing a trained gate set and its threshold for a target kept share, shared by the matched-memory
recipes. `measure(spec)` runs kvc-eval kl on the training text with `--lowrank *spec` and returns its
report with "kept_share" added."""


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
