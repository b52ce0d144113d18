"""recipes/lib/matched_memory.py's rate controls on a made-up gate family whose kept share is a known
function of α and τ: the paper's (τ as trained, α chosen or bisected) and kvc's (τ bisected)."""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "recipes" / "lib"))
from matched_memory import alpha_for_share, best_gate_set, nearest_gate_set  # noqa: E402


def share_of(alpha, tau):
    """A gate set trained at α keeps less at a larger α and a larger τ."""
    return 1.0 / (1.0 + alpha * (0.5 + tau))


def measure(spec):
    name, _, tau = spec[0].partition(":tau=")
    alpha = float(name.split("alpha-")[1])
    return {"kept_share": share_of(alpha, float(tau) if tau else 0.1), "kl": alpha}


def main():
    gates = {f"a{a}": f"gates.alpha-{a}" for a in (0.25, 1, 4, 16)}
    # The paper's control: each gate set at τ = 0.1; the one nearest the share, or none within tolerance.
    got = nearest_gate_set(measure, gates, 0.3, 0.02)
    assert got["label"] == "a4" and got["spec"] == ["gates.alpha-4"], got
    assert abs(got["kept_share"] - share_of(4, 0.1)) < 1e-12
    assert nearest_gate_set(measure, gates, 0.6, 0.02) is None
    # α bisected by training: lands within tolerance of the share at τ = 0.1, training only the probes.
    trained = []

    def train(alpha):
        trained.append(alpha)
        return f"gates.alpha-{alpha}"

    got = alpha_for_share(train, measure, 0.45, 0.25, 64, 20, 0.005)
    assert abs(got["kept_share"] - 0.45) <= 0.005, got
    want_alpha = (1 / 0.45 - 1) / 0.6
    assert abs(math.log(got["alpha"] / want_alpha)) < 0.05, (got, want_alpha)
    assert len(trained) == len(set(trained)) and len(trained) < 20, trained
    assert alpha_for_share(train, measure, 0.99, 0.25, 64, 20, 0.005) is None  # outside what [lo, hi] gives
    # kvc's control: τ bisected per gate set, the lowest KL (here: the smallest α) that reaches the share.
    got = best_gate_set(measure, gates, 0.3, 12)
    tau = float(got["spec"][0].split(":tau=")[1])
    assert got["label"] == "a4", got  # a1 cannot reach 0.3 at any τ; a16 has the larger KL
    assert abs(measure(got["spec"])["kept_share"] - 0.3) < 0.01, got
    assert tau != 0.1
    print("matched_memory rate controls: ok")


if __name__ == "__main__":
    main()
