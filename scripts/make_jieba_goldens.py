#!/usr/bin/env python3
"""Writes the goldens that test kvc's C++ jieba port and LongBench's Chinese metrics against Python.

Developer tool, not needed to build or test kvc. Needs Python with jieba 0.42.1, rouge and fuzzywuzzy
(pip install jieba==0.42.1 rouge fuzzywuzzy) and a clone of THUDM/LongBench for its metrics.py.

There is no Chinese corpus in the repository, so the texts are generated (seeded) from the words of
jieba's own dict.txt plus characters it does not know (which the HMM then segments), punctuation,
Latin words, numbers, full-width forms, whitespace, emoji and other scripts.

Writes into --out:
  segmentation.json  texts with jieba.cut(text, cut_all=False) as token lengths in code points
  metrics.json       qa_f1_zh_score / rouge_zh_score on pairs of those texts (by index), and
                     retrieval_zh_score on explicit pairs, computed by LongBench's metrics.py
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile

CHINESE_PUNCTUATION = list("，。、！？：；“”‘’（）《》【】…—～·「」『』〈〉﹏")
ASCII_TOKENS = [
    "GPT-4", "x86_64", "e-mail", "C#", "C++", "c++", "AT&T", ".NET", "1,000", "3.14", "0.5%", "45%", "12.5%",
    "v1.2.3", "2024", "2024年", "Python3", "iPhone", "NBA", "USB3.0", "A4", "100km", "3.5.7", "a.b.c",
    "hello", "World", "OK", "U.S.A.", "$100", "#1", "foo_bar", "--", "...", "50%off", "1.5x", "T恤", "B超",
    "K歌", "Q&A", "-3", "+86", "10.0.0.1", "mp3", "3D", "Wi-Fi", "COVID-19", "5G", "4.", ".5", "%", "&",
]
FULL_WIDTH = ["１２３", "２０２４年", "ＡＢＣ", "ｘｙｚ", "３．５％", "Ｇｏｏｇｌｅ", "（１）", "Ⅲ", "Ⅻ", "①", "⑩", "Ⓐ"]
WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u3000", "\xa0", "\u2028", "\x0b", "\x0c", " \n ", "\n\n", "\r\n\r\n"]
OTHER = ["😀", "👍🏽", "🇨🇳", "é", "e\u0301", "Ω", "ΑΒΓ", "Σοφία", "한국어", "日本語です", "カタカナ", "١٢٣", "٤٥",
         "İstanbul", "ß", "Привет", "\u200b", "\ufeff", "\ufffd", "𠀀", "𪚥", "\u3400", "\u9fd6", "\u9fff", "\uf900",
         "〇", "々", "ー", "・", "©", "™", "°C", "±", "×", "÷", "∶"]


def load_dictionary(jieba_dir):
    words = []
    with open(os.path.join(jieba_dir, "dict.txt"), encoding="utf-8") as f:
        for line in f:
            word, freq = line.split()[:2]
            words.append((word, int(freq)))
    return words


class TextMaker:
    def __init__(self, rng, words):
        self.rng = rng
        chinese = [(w, f) for w, f in words if all("\u4e00" <= c <= "\u9fd5" for c in w)]
        chinese.sort(key=lambda wf: -wf[1])
        self.common = [w for w, _ in chinese[:20000]]
        self.common_weights = [f for _, f in chinese[:20000]]
        self.rare = [w for w, _ in chinese[20000:]]
        self.non_chinese_words = [w for w, _ in words if not all("\u4e00" <= c <= "\u9fd5" for c in w)]
        self.common_chars = sorted({c for w in self.common[:3000] for c in w})

    def piece(self):
        rng = self.rng
        kind = rng.choices(
            ["common", "rare", "han", "unknown_run", "punct", "ascii", "dict_other", "full", "space", "other"],
            [45, 12, 10, 8, 8, 6, 2, 3, 4, 2])[0]
        if kind == "common":
            return rng.choices(self.common, self.common_weights)[0]
        if kind == "rare":
            return rng.choice(self.rare)
        if kind == "han":
            return chr(rng.randint(0x4E00, 0x9FD5))
        if kind == "unknown_run":  # common characters in new combinations: the HMM's input
            return "".join(rng.choice(self.common_chars) for _ in range(rng.randint(2, 5)))
        if kind == "punct":
            return rng.choice(CHINESE_PUNCTUATION)
        if kind == "ascii":
            return rng.choice(ASCII_TOKENS)
        if kind == "dict_other":
            return rng.choice(self.non_chinese_words)
        if kind == "full":
            return rng.choice(FULL_WIDTH)
        if kind == "space":
            return rng.choice(WHITESPACE)
        return rng.choice(OTHER)

    def text(self, max_pieces=20):
        pieces = [self.piece() for _ in range(self.rng.randint(1, max_pieces))]
        joiner = " " if self.rng.random() < 0.1 else ""
        return joiner.join(pieces)

    def long_text(self, length, sentence_dots=True):
        """With sentence_dots False no '.' splits it into sentences for Rouge: one long LCS walk."""
        parts = []
        while sum(map(len, parts)) < length:
            parts.append(self.text())
            parts.append(self.rng.choice(["。", "，", "！", "\n", ".", ""]))
        text = "".join(parts)
        return text if sentence_dots else text.replace(".", "。")

    def perturb(self, text):
        """A plausible model answer to compare with `text`: edited, reordered, restyled or unrelated."""
        rng = self.rng
        kind = rng.choices(["edit", "edit", "edit", "reorder", "style", "same", "unrelated", "empty"],
                           [30, 20, 10, 10, 10, 5, 10, 2])[0]
        chars = list(text)
        if kind == "edit":
            for _ in range(rng.randint(1, 4)):
                at = rng.randint(0, len(chars))
                op = rng.random()
                if op < 0.4 and chars:
                    del chars[at:at + rng.randint(1, 4)]
                elif op < 0.8:
                    chars[at:at] = list(self.piece())
                else:
                    chars[at:at + 2] = list(self.piece())
            return "".join(chars)
        if kind == "reorder":
            cut = rng.randint(0, len(chars))
            return "".join(chars[cut:] + chars[:cut])
        if kind == "style":
            styled = text.upper() if rng.random() < 0.5 else text
            return rng.choice(["答案：", "", "“", "  "]) + styled + rng.choice(["。", "！", "", "\n", "”"])
        if kind == "same":
            return text
        if kind == "unrelated":
            return self.text()
        return ""


def retrieval_pairs(rng, maker):
    digits = [
        lambda n: str(n),
        lambda n: "".join(chr(0xFF10 + int(d)) for d in str(n)),  # full-width
        lambda n: "".join(chr(0x660 + int(d)) for d in str(n)),   # Arabic-Indic
    ]
    pairs, failing = [], []
    for _ in range(300):
        n = rng.randint(0, 40)
        number = rng.choices(digits, [85, 10, 5])[0](n)
        truth = rng.choice(["段落{}", "段落{}", "答案是段落{}。", "段落 1，段落{}", "见段落{}和段落7"]).format(number)
        guesses = [number, number, number, str(n), str(n + 1), str(rng.randint(0, 40)), digits[1](n), digits[2](n),
                   "0" + str(n), f"{n}.5"]
        prediction = "".join(
            rng.choice(["段落" + rng.choice(guesses), "第" + rng.choice(guesses) + "段", rng.choice(guesses),
                        maker.piece(), "，", " "]) for _ in range(rng.randint(0, 4)))
        pairs.append((prediction, truth))
    for truth in ["", "段落", "段落 3", "第3段", "Paragraph 3"]:
        failing.append(("段落3", truth))
    return pairs, failing


def import_longbench_metrics(git_dir):
    source = subprocess.run(["git", "-C", git_dir, "show", "HEAD:LongBench/metrics.py"], check=True,
                            capture_output=True, text=True).stdout
    commit = subprocess.run(["git", "-C", git_dir, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    folder = tempfile.mkdtemp(prefix="longbench_metrics_")
    with open(os.path.join(folder, "metrics.py"), "w", encoding="utf-8") as f:
        f.write(source)
    sys.path.insert(0, folder)
    import metrics  # noqa: E402  LongBench's, from the folder above
    return metrics, commit


def rouge_is_stable(metrics, prediction, truth):
    """False when the rouge package's recursive LCS walk ends near Python's recursion limit, where the
    result (a value, or 0.0 after RecursionError) depends on how deep the caller's stack is."""
    limit = sys.getrecursionlimit()
    values = []
    for probe in (limit - 30, limit + 30):
        sys.setrecursionlimit(probe)
        try:
            values.append(metrics.rouge_zh_score(prediction, truth))
        finally:
            sys.setrecursionlimit(limit)
    return values[0] == values[1]


def write_json(path, metadata, sections):
    """Indented metadata, then each section's rows one per line: small, and readable in a diff."""
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"metadata":' + json.dumps(metadata, ensure_ascii=False, indent=1))
        for key, rows in sections.items():
            f.write(',\n"' + key + '":[\n')
            f.write(",\n".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) for row in rows))
            f.write("\n]")
        f.write("}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--texts", type=int, default=1300, help="generated short texts")
    parser.add_argument("--pairs", type=int, default=700, help="qa_f1_zh / rouge_zh pairs of short texts")
    parser.add_argument("--long-texts", type=int, default=6, help="texts of 1,000 to 3,000 characters")
    parser.add_argument("--longbench-git", required=True, help="git dir of a THUDM/LongBench clone")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "reference", "jieba"))
    args = parser.parse_args()

    import jieba
    jieba.setLogLevel(60)
    jieba.initialize()
    metrics, longbench_commit = import_longbench_metrics(args.longbench_git)
    jieba_dir = os.path.dirname(jieba.__file__)
    rng = random.Random(args.seed)
    maker = TextMaker(rng, load_dictionary(jieba_dir))

    texts = ["", " ", "\r\n", "\n\r", "中", "。", "a", "1", "１", "😀", "\t\t", "   中文   ", "中文\r\n英文"]
    texts += [maker.text() for _ in range(args.texts)]
    texts += [maker.long_text(rng.randint(1000, 3000)) for _ in range(args.long_texts)]
    # Rouge on more than about 1,000 words in one sentence: LongBench gets RecursionError and scores 0.
    texts += [maker.long_text(length, sentence_dots=False) for length in (400, 1400, 2500)]

    pair_rows, skipped_near_limit = [], 0
    short = [i for i, t in enumerate(texts) if len(t) <= 120]
    long_ids = [i for i, t in enumerate(texts) if len(t) > 120]
    for truth_id in [rng.choice(short) for _ in range(args.pairs)] + long_ids:
        prediction = maker.perturb(texts[truth_id])
        if not rouge_is_stable(metrics, prediction, texts[truth_id]):
            skipped_near_limit += 1
            continue
        texts.append(prediction)
        pair_rows.append({"prediction": len(texts) - 1, "ground_truth": truth_id,
                          "qa_f1_zh": float(metrics.qa_f1_zh_score(prediction, texts[truth_id])),
                          "rouge_zh": float(metrics.rouge_zh_score(prediction, texts[truth_id]))})

    retrieval, failing = retrieval_pairs(rng, maker)
    retrieval_rows = [{"prediction": p, "ground_truth": t, "retrieval_zh": metrics.retrieval_zh_score(p, t)}
                      for p, t in retrieval]
    for p, t in failing:
        try:
            metrics.retrieval_zh_score(p, t)
            raise SystemExit(f"expected LongBench to fail on ground truth {t!r}")
        except IndexError:
            pass

    segmentation_rows = [{"text": t, "token_lengths": [len(w) for w in jieba.cut(t, cut_all=False)]} for t in texts]
    dict_sha256 = hashlib.sha256(open(os.path.join(jieba_dir, "dict.txt"), "rb").read()).hexdigest()
    metadata = {
        "generator": "scripts/make_jieba_goldens.py",
        "arguments": {k: v for k, v in vars(args).items() if k != "out"},
        "jieba_version": jieba.__version__,
        "jieba_dict_sha256": dict_sha256,
        "python": sys.version.split()[0],
        "texts_note": "generated from jieba's dict.txt words, unknown characters, punctuation, Latin, digits, "
                      "full-width forms, whitespace, emoji and other scripts; not a real corpus",
    }
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "segmentation.json"),
               dict(metadata, call="jieba.cut(text, cut_all=False), token lengths in code points"),
               {"cases": segmentation_rows})
    metric_metadata = dict(metadata, longbench_commit=longbench_commit, longbench_file="LongBench/metrics.py",
                           pairs_note="prediction and ground_truth index segmentation.json's cases",
                           skipped_pairs_near_recursion_limit=skipped_near_limit,
                           retrieval_failing_ground_truths=[t for _, t in failing])
    write_json(os.path.join(args.out, "metrics.json"), metric_metadata,
               {"pairs": pair_rows, "retrieval_pairs": retrieval_rows})
    print(f"{len(texts)} texts, {len(pair_rows)} metric pairs ({skipped_near_limit} skipped near the recursion "
          f"limit), {len(retrieval_rows)} retrieval pairs")


if __name__ == "__main__":
    main()
