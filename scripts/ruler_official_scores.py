#!/usr/bin/env python3
"""Scores a fixed set of predictions with RULER's own scorer and writes the results to
data/reference/ruler_scorer/official_scores.json, which tests/base/test_ruler_metrics.cpp compares with
kvc's ruler_metrics.

Usage: python3 scripts/ruler_official_scores.py --ruler DIR [--out DIR]
--ruler is a clone of github.com/NVIDIA/RULER (a bare mirror is read with `git show HEAD:...`).
A developer tool: kvc and its tests never run it.

The code scored with is RULER's, not a copy: scripts/eval/synthetic/constants.py is imported as it is,
and postprocess_pred is taken from scripts/eval/evaluate.py's syntax tree (importing evaluate.py itself
would need nltk, pandas and NeMo). Per-case scores are taken with `round` replaced by the identity in the
metrics' module, so that kvc's unrounded per-sample values can be compared to 1e-9; the task scores of
the groups use RULER's rounding unchanged.
"""
import argparse
import ast
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile


def ruler_file(ruler, path):
    if os.path.isfile(os.path.join(ruler, path)):
        with open(os.path.join(ruler, path), encoding="utf-8") as f:
            return f.read()
    return subprocess.run(["git", "-C", ruler, "show", f"HEAD:{path}"], check=True, capture_output=True,
                          text=True).stdout


def ruler_commit(ruler):
    return subprocess.run(["git", "-C", ruler, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def load_official(ruler, folder):
    path = os.path.join(folder, "ruler_eval_constants.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(ruler_file(ruler, "scripts/eval/synthetic/constants.py"))
    spec = importlib.util.spec_from_file_location("ruler_eval_constants", path)
    constants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(constants)

    tree = ast.parse(ruler_file(ruler, "scripts/eval/evaluate.py"))
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "postprocess_pred"]
    if not wanted:
        raise SystemExit("evaluate.py: postprocess_pred not found; has RULER changed?")
    namespace = {}
    module = ast.fix_missing_locations(ast.Module(body=[ast.Import(names=[ast.alias(name="re")])] + wanted,
                                                  type_ignores=[]))
    exec(compile(module, "evaluate.py", "exec"), namespace)
    return constants, namespace["postprocess_pred"]


# Pieces the adversarial predictions and references are drawn from: case pairs across scripts, the
# characters Python lower-cases specially (U+0130, final sigma, Kelvin and Angstrom signs), whitespace
# str.strip() removes, the control characters postprocess_pred rewrites, and plain words and numbers.
PIECES = [
    "a", "A", "abc", "ABC", "Abc", "magic", "MAGIC", "number", "1234567", "7654321", " ", "  ", ", ", ".", "-",
    "\u0130", "i", "I", "i\u0307", "\u0131", "\u03a3", "\u03c3", "\u03c2", "\u039f\u0394\u039f\u03a3",
    "\u03bf\u03b4\u03bf\u03c2", "\u03a3\u0391", "'", "\u212a", "k", "\u212b", "\u00e5", "\u00c5", "\u00df",
    "\u1e9e", "SS", "\u00c9", "\u00e9", "e\u0301", "\u0401", "\u0451", "\u0416\u0416", "\u0436", "\u01c5",
    "\u01c4", "\u01c6", "\u10a0", "\u2d00", "\u1c90", "\u10d0", "\u13a0", "\uab70", "\uff21", "\uff41",
    "\u2160", "\u2170", "\u24b6", "\u24d0", "\U00010400", "\U00010428", "\U0001e900", "\U0001e922",
    "\u00a0", "\u2028", "\u3000", "\u0085", "\u200b", "\ufeff", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c",
    "\x1f", "\x00", "\x01", "\x1b", "\x7f", "\x80", "\u00ad", "\U0001f600", "\u200d", "\ufffd", "\u4e2d\u6587",
    "\u0627\u0644", "\u00bd", "x\u0345", "\u0345", "\u1fbc", "\u1f88", "\u0587",
]

WORDS = ["apple", "Bright-Harbor", "silver-lantern", "uuid", "9f1c2e4a-5b6d-4e7f-8a9b-0c1d2e3f4a5b", "VAR",
         "QXZRT", "ABCDE", "12345", "Paris", "the Eiffel Tower", "1889", "Marie Curie", "Zürich", "ÉCOLE"]


# Capitals that lower-case to a letter other than their usual capital does, or to two code points.
EXOTIC_CAPITALS = {"k": "\u212a", "\u00e5": "\u212b", "\u03c9": "\u2126", "i": "\u0130", "\u03c2": "\u03a3",
                   "\u03c3": "\u03a3", "\u00df": "\u1e9e", "\u01c6": "\u01c5", "a": "\uff21", "\u10d0": "\u1c90"}


def exotic_upper(text):
    return "".join(EXOTIC_CAPITALS.get(ch, ch.upper()) for ch in text)


def adversarial(rng):
    def text(min_pieces, max_pieces):
        return "".join(rng.choice(PIECES + WORDS) for _ in range(rng.randint(min_pieces, max_pieces)))

    references = [text(0 if rng.random() < 0.05 else 1, 3) for _ in range(rng.randint(1, 4))]
    prediction = text(0, 8)
    # Often put the references into the prediction, changed in case or padded, so that both outcomes occur.
    for reference in references:
        if rng.random() < 0.5:
            variant = rng.choice([reference, reference.upper(), reference.lower(), reference.swapcase(),
                                  exotic_upper(reference)])
            prediction += rng.choice(["", " ", "\n", "\x00", ", "]) + variant
    if rng.random() < 0.3:
        prediction = rng.choice(["  ", "\n", "\x1c", "\u3000", "\x00", "\t\x1f"]) + prediction
    if rng.random() < 0.3:
        prediction += rng.choice(["  ", "\n", "\x85", "\x00", "\u2029"])
    return prediction, references


def realistic(rng):
    kind = rng.choice(["niah", "vt", "cwe", "qa"])
    if kind == "niah":
        values = [str(rng.randint(10**6, 10**7 - 1)) for _ in range(rng.choice([1, 4]))]
        said = [v if rng.random() < 0.7 else str(rng.randint(10**6, 10**7 - 1)) for v in values]
        prediction = " " + ", ".join(said) + rng.choice([".", "", ".\n\nWhat are all the special magic"])
        return prediction, values
    if kind == "vt":
        names = ["".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5)) for _ in range(5)]
        said = [n for n in names if rng.random() < 0.8]
        return " " + " ".join(said) + rng.choice(["", "\nQuestion:"]), names
    if kind == "cwe":
        words = rng.sample(WORDS[:4] + ["river", "Castle", "lemon", "tiger", "banner", "ocean", "violet"], 10)
        said = [w.upper() if rng.random() < 0.2 else w for w in words if rng.random() < 0.8]
        return " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(said)), words
    answers = rng.choice([["Paris"], ["the Eiffel Tower", "Eiffel Tower"], ["1889"], ["Marie Curie", "Curie"]])
    prediction = rng.choice([answers[-1], answers[0].upper(), "I think it is " + answers[0].lower() + ".", "unknown"])
    return " " + prediction, answers


def long_case(rng, length):
    prediction = "".join(rng.choice(PIECES + WORDS) for _ in range(length))
    return prediction, [prediction[length // 2: length // 2 + 7], "absent reference"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ruler", required=True, help="clone of NVIDIA/RULER")
    parser.add_argument("--out", default="data/reference/ruler_scorer")
    args = parser.parse_args()

    rng = random.Random(20240601)
    cases = [("", [""]), ("", ["a"]), ("   ", [" "]), ("\x00", ["\n"]), ("a\tb", ["a\tb"]), ("a\tb", ["a\nb"]),
             ("\u212a", ["k"]), ("\u0130", ["i"]), ("i", ["\u0130"]), ("\u039f\u0394\u039f\u03a3 \u039a", ["\u03bf\u03b4\u03bf\u03c2"]),
             ("\u039f\u0394\u039f\u03a3\u039a", ["\u03bf\u03b4\u03bf\u03c2"]), ("\U00010400", ["\U00010428"]),
             ("\u24b6", ["\u24d0"]), ("\u13a0", ["\uab70"]), ("\u01c5", ["\u01c6"]), ("\u1e9e", ["\u00df"]),
             ("\u2126", ["\u03c9"]), ("\u0386", ["\u03ac"]), ("\uff21\uff22", ["\uff41\uff42"]), ("\u1c90", ["\u10d0"])]
    cases += [adversarial(rng) for _ in range(1500)]
    cases += [realistic(rng) for _ in range(700)]
    cases += [long_case(rng, n) for n in (1500, 3000)]

    with tempfile.TemporaryDirectory() as folder:
        constants, postprocess_pred = load_official(args.ruler, folder)
        rounded = {name: getattr(constants, name) for name in ("string_match_all", "string_match_part")}
        constants.round = lambda x, digits=None: x  # per-case scores unrounded (the module's globals)
        out_cases = []
        for prediction, references in cases:
            processed = postprocess_pred(prediction, {})
            case = {"prediction": prediction, "references": references}
            if processed != prediction:  # absent: postprocess_pred left the prediction as it was
                case["postprocessed"] = processed
            case["string_match_all"] = constants.string_match_all([processed], [references])
            case["string_match_part"] = constants.string_match_part([processed], [references])
            out_cases.append(case)
        del constants.round
        # Tasks of 50 consecutive cases, scored as evaluate.py reports them (x100, rounded).
        groups = []
        for start in range(0, len(cases), 50):
            chunk = cases[start:start + 50]
            preds = [postprocess_pred(p, {}) for p, _ in chunk]
            refs = [r for _, r in chunk]
            groups.append({"first": start, "count": len(chunk),
                           "string_match_all": rounded["string_match_all"](preds, refs),
                           "string_match_part": rounded["string_match_part"](preds, refs)})

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "official_scores.json")
    with open(path, "w", encoding="utf-8") as f:
        # One case per line: small, and a changed case shows as one line in a diff.
        header = {"ruler_commit": ruler_commit(args.ruler), "python": sys.version.split()[0],
                  "note": "per-case scores are percent, unrounded; group scores are rounded as evaluate.py does"}
        f.write(json.dumps(header, ensure_ascii=False)[:-1] + ',\n"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in out_cases))
        f.write('\n],\n"groups": [\n')
        f.write(",\n".join(json.dumps(g, separators=(",", ":")) for g in groups))
        f.write("\n]}\n")
    print(f"{path}: {len(out_cases)} cases, {len(groups)} groups, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
