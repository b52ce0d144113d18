#!/usr/bin/env python3
"""Builds the inputs of the LongBench scorer goldens: data/reference/longbench_scorer/cases.jsonl (one
(metric, prediction, ground truth, all_classes) per line) and datasets.jsonl (LongBench prediction
records, {"dataset", "pred", "answers", "all_classes"}, for eval.py's per-data-set totals).

class_lists.json names the class lists of the classification cases. The cases are seeded: adversarial strings per metric (empty, whitespace, punctuation, Unicode spaces,
digits and case, very long texts, "Paragraph N" variants, nested class names, code with fences and
comments), real model output (kvc-generate with data/models/stories260K and kvc-micro-lm continuing
prompts cut from data/text, paired with the text that really follows), answer-like spans of data/text
and code lines of lib/. scripts/longbench_official_scores.py then scores them with LongBench's own code.

Usage: python3 scripts/make_longbench_scorer_cases.py [--kvc-generate build/bin/kvc-generate]
         [--out data/reference/longbench_scorer] [--seed 20240601]
A developer tool: kvc and its tests never run it.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import random
import re
import subprocess

OFFICIAL_TO_KVC = {
    "qa_f1_score": "qa_f1", "rouge_score": "rouge_l", "classification_score": "classification",
    "retrieval_score": "retrieval", "count_score": "count", "code_sim_score": "code_sim",
    "qa_f1_zh_score": "qa_f1_zh", "rouge_zh_score": "rouge_zh", "retrieval_zh_score": "retrieval_zh",
}

# Strings that stress Python's str semantics: Unicode spaces (str.split), case (str.lower, including
# İ and the final sigma), \w for \b (combining marks are not word characters), \d (any decimal digit).
ODD_STRINGS = [
    "", " ", "\t\n ", "\u3000", "\u00a0", "\u2028", "\x1c", "\x85", "\u200b", "\x00", ".", "...", ". . .",
    "!!!", "?", "!@#$%^&*()", "“quoted”", "—", "–", "…", "'", "a", "an", "the", "The", "THE", "A An THE",
    "the\u0301 end", "a\u0308 b", "an_apple", "the_end", "A-team", "the's", "Café Crème", "ÉCOLE", "naïve",
    "İstanbul", "ISTANBUL", "ΟΔΟΣ ΣΟΦΟΣ", "ΑΣ.", "Σ", "ΣΑΣ", "ὈΔΥΣΣΕΎΣ", "straße", "STRASSE", "ﬁnal",
    "ǅemal", "Ⅻ chapter", "北京是中国的首都", "東京タワー", "한국어 텍스트", "👍🏽 the 🎉", "👨‍👩‍👧 family",
    "مرحبا بالعالم", "שָׁלוֹם עולם", "ＡＢＣ１２３", "１２", "٣٤", "१२", "²", "½", "Ⅳ", "abc123def", "12abc",
    "1,234", "3.14", "007", "0", "10", "a\u00a0cat", "cat\u3000dog", "ＴＨＥ cat", "The\u2014end", "x\u2009y",
    "K\u212a", "\u212b", "Ωmega ω", "ǈ", "ß", "ﬀ", "\U0001d400\U0001d401", "𝟙𝟚", "\ufeffBOM",
]

WORDS = ("the a an cat dog sat on mat tower Eiffel Paris is was 12 7 2019 of and in to John Smith "
         "answer yes no unanswerable city river king queen").split()

TREC_CLASSES = [
    "Abbreviation", "Expression abbreviated", "Animal", "Organ of body", "Color", "Invention, book and other "
    "creative piece", "Currency name", "Disease and medicine", "Event", "Food", "Musical instrument",
    "Language", "Letter like a-z", "Other entity", "Plant", "Product", "Religion", "Sport",
    "Element and substance", "Symbol and sign", "Techniques and method", "Equivalent term", "Vehicle",
    "Word with a special property", "Definition of something", "Description of something",
    "Manner of an action", "Reason", "Group or organization of persons", "Individual", "Title of a person",
    "Description of a person", "City", "Country", "Mountain", "Other location", "State", "Postcode or "
    "other code", "Number of something", "Date", "Distance, linear measure", "Price", "Order, rank",
    "Other number", "Lasting time of something", "Percent, fraction", "Speed", "Temperature",
    "Size, area and volume", "Weight",
]
LSHT_CLASSES = ["农业、农村", "军事", "教育", "体育", "经济", "科技", "文化", "政治", "社会", "法律、司法",
                "国际", "环境", "交通", "医药、卫生", "娱乐", "能源", "灾难、事故", "天气", "经济、金融"]
NESTED_CLASSES = ["location", "Other location", "Other", "Other location name", "cat", "category", "at",
                  "a", "", "Location", "loc"]

ZH_TEXT = [
    "上下文压缩是长文本推理中的关键问题。", "大型语言模型在处理长文档时，键值缓存会占用大量显存。",
    "研究者提出了多种压缩方法，例如保留注意力得分最高的词元。", "北京是中华人民共和国的首都，也是全国的政治、文化中心。",
    "2024年，北京常住人口约为2185万人。", "他说：“我们明天去上海开会。”", "会议讨论了预算、人员和下一季度的计划。",
    "小明今天很高兴，因为他考了一百分！", "这部电影讲述了一个关于友谊和勇气的故事。", "长江是中国第一长河，全长约6300公里。",
    "请根据上述文章回答问题。", "答案是：段落12。", "我们在2023年第3季度完成了项目的第一阶段。", "今天天气晴朗，气温二十五度。",
    "经济学家认为，通货膨胀将在明年放缓。", "人工智能技术正在改变医疗、教育和交通等领域。",
]

# Named so that cases.jsonl carries a name rather than the list (class_lists.json holds them).
CLASS_LISTS = {
    "trec": TREC_CLASSES, "lsht": LSHT_CLASSES, "nested": NESTED_CLASSES,
    "nested_short": ["Other location", "location", "Other"], "repeated": ["location", "location", "Other location"],
    "prefixes": ["a", "b", "ab", "abc"], "human": ["Human", "Human being"], "none": [], "empty_name": [""],
}

CODE_NOISE = ["```python", "```", "# comment", "// note", "x = y // 2", "print('#')", "`code`", "", "   ",
              "/* block */", "int x = 0;", "return a#b;"]


def seeded_pick(rng, items, k):
    return [rng.choice(items) for _ in range(k)]


def read_text(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def text_sources(root):
    paths = sorted(glob.glob(os.path.join(root, "data/text/pg_essays/*.txt")))
    paths += [os.path.join(root, "data/text/tinystories/tinystories_excerpt_30k.txt"),
              os.path.join(root, "data/text/wikitext2/wiki.test.raw")]
    return {path: read_text(path) for path in paths}


def word_window(rng, text, length):
    words = text.split()
    start = rng.randrange(0, max(1, len(words) - length))
    return words[start:start + length], words[start + length:start + 2 * length]


def generate(args):
    binary, model, prompt, tokens, temperature, seed = args
    command = [binary, "-m", model, "-p", prompt, "-n", str(tokens), "--temp", str(temperature), "-s", str(seed),
               "-t", "1", "--json"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["text"]


def model_outputs(rng, root, binary, sources, count):
    """(prompt, continuation kvc generated, text that really follows) for `count` prompts."""
    jobs, references = [], []
    tiny = os.path.join(root, "data/text/tinystories/tinystories_excerpt_30k.txt")
    for index in range(count):
        stories = index % 2 == 0
        path = tiny if stories else rng.choice(sorted(sources))
        prompt_words, following = word_window(rng, sources[path], rng.randint(8, 40))
        model = "data/models/stories260K" if stories else "data/models/kvc-micro-lm"
        temperature = 0 if index % 3 == 0 else 0.8
        jobs.append((binary, os.path.join(root, model), " ".join(prompt_words), rng.randint(16, 120), temperature,
                     rng.randrange(1000)))
        references.append(" ".join(following))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        texts = list(pool.map(generate, jobs))
    return [(job[2], text, reference) for job, text, reference in zip(jobs, texts, references)]


def code_lines(root, rng, count):
    lines = []
    for path in sorted(glob.glob(os.path.join(root, "lib/*/*.cpp"))):
        lines += [line for line in read_text(path).split("\n") if line.strip()]
    return seeded_pick(rng, lines, count)


def mutate(rng, text):
    """A near miss of `text`: a character dropped, doubled, swapped or replaced, or words reordered."""
    if not text:
        return rng.choice(["x", " ", ""])
    choice = rng.randrange(5)
    i = rng.randrange(len(text))
    if choice == 0:
        return text[:i] + text[i + 1:]
    if choice == 1:
        return text[:i] + text[i] + text[i:]
    if choice == 2:
        return text[:i] + rng.choice("abcxyz0123 .,;()_#/`é北") + text[i + 1:]
    if choice == 3:
        words = text.split(" ")
        rng.shuffle(words)
        return " ".join(words)
    return text.upper() if rng.random() < 0.5 else text.lower()


def odd_mix(rng, k):
    parts = seeded_pick(rng, ODD_STRINGS + WORDS, k)
    return rng.choice([" ", "", "\n", " . ", "\u3000"]).join(parts)


class Cases:
    def __init__(self):
        self.rows = []

    def add(self, metric, group, prediction, ground_truth, class_list=None):
        index = sum(1 for row in self.rows if row["metric"] == metric and row["group"] == group)
        row = {"id": f"{OFFICIAL_TO_KVC[metric]}/{group}/{index}", "metric": metric, "group": group,
               "prediction": prediction, "ground_truth": ground_truth}
        if class_list is not None:
            row["class_list"] = class_list
        self.rows.append(row)


def adversarial(rng, cases):
    for metric in ["qa_f1_score", "rouge_score", "code_sim_score", "count_score"]:
        for odd in ODD_STRINGS:
            cases.add(metric, "odd", odd, rng.choice(ODD_STRINGS + WORDS))
            cases.add(metric, "odd", rng.choice(ODD_STRINGS + WORDS), odd)
        for _ in range(120):
            cases.add(metric, "mixed", odd_mix(rng, rng.randint(0, 8)), odd_mix(rng, rng.randint(0, 5)))
    for odd in ODD_STRINGS[:40]:
        cases.add("qa_f1_score", "odd", odd, odd)
        cases.add("rouge_score", "odd", odd, odd)
    # Pairs that agree only if case, articles and word boundaries are decided as Python decides them.
    for odd in ODD_STRINGS:
        cases.add("qa_f1_score", "case", odd.upper(), odd.lower())
        cases.add("qa_f1_score", "case", odd.lower() + " end", odd.upper() + " END")
        cases.add("qa_f1_score", "article", "the" + odd + " end", odd + " end")
        cases.add("qa_f1_score", "article", odd + "a " + odd, "an" + odd)
    # Paragraph numbers: spacing, case, Unicode digits, several mentions, none at all (LongBench raises).
    truths = ["Paragraph 12", "Paragraph 3", "Paragraph 012", "Paragraph １２", "Paragraph ٣", "paragraph 12",
              "Paragraph12", "Paragraph  12", "Paragraph\u00a012", "The answer is Paragraph 7.",
              "Paragraph Paragraph 9", "Paragraph 4 and Paragraph 5", "", "no paragraph", "Paragraph x"]
    predictions = ["Paragraph 12", "Paragraph 3", "12", "Paragraph 120", "Paragraph 12, Paragraph 3", "１２",
                   "Paragraph ١٢", "paragraph twelve", "", "Paragraph 1 2", "P12", "Paragraph 12.5", "3 3 3 12",
                   "The answer is Paragraph 7", "Paragraph 9", "007", "Paragraph 4", "²12"]
    for truth in truths:
        for prediction in predictions:
            cases.add("retrieval_score", "paragraph", prediction, truth)
    for _ in range(150):
        cases.add("retrieval_score", "mixed", odd_mix(rng, rng.randint(0, 6)), f"Paragraph {rng.randint(0, 40)}")
    for truth in ["7", "12", "007", "１２", "0", "", "seven", "3.5", "1,234"]:
        for prediction in predictions + ["There are 7 unique paragraphs", "7 or 8", "12 12 12", "1,234", "3.5"]:
            cases.add("count_score", "number", prediction, truth)
    # Class names nested inside each other, repeated, empty, or differing only in case.
    for list_name in ["trec", "lsht", "nested", "nested_short", "repeated", "prefixes", "human"]:
        classes = CLASS_LISTS[list_name]
        for _ in range(60):
            named = seeded_pick(rng, classes, rng.randint(0, 4))
            prediction = rng.choice([", ", " or ", "", "\n", " "]).join(named)
            if rng.random() < 0.3:
                prediction = odd_mix(rng, 2) + prediction
            truth = rng.choice(classes + [rng.choice(ODD_STRINGS)] if rng.random() < 0.1 else classes)
            cases.add("classification_score", "classes", prediction, truth, list_name)
    cases.add("classification_score", "classes", "anything", "x", "none")
    cases.add("classification_score", "classes", "", "", "empty_name")
    cases.add("classification_score", "classes", "x", "", "empty_name")


def code_cases(rng, root, cases):
    for line in code_lines(root, rng, 260):
        kind = rng.randrange(5)
        if kind == 0:
            prediction = line
        elif kind == 1:
            prediction = mutate(rng, line)
        elif kind == 2:
            noise = seeded_pick(rng, CODE_NOISE, rng.randint(1, 4))
            prediction = "\n" * rng.randint(0, 2) + "\n".join(noise + [mutate(rng, line), line])
        elif kind == 3:
            prediction = line.strip()
        else:
            prediction = rng.choice(["```", "# only comments\n```", "\n\n", line + "  // trailing", ""])
        cases.add("code_sim_score", "code", prediction, line.strip() if rng.random() < 0.5 else line)
    # Long lines: difflib's autojunk starts at 200 characters of the ground truth.
    for length in [150, 199, 200, 201, 250, 400, 1000, 2500]:
        for _ in range(2):
            alphabet = rng.choice(["ab", "abc ", "abcdefgh(){};= ", "e ", "北京a"])
            truth = "".join(rng.choice(alphabet) for _ in range(length))
            prediction = "".join(rng.choice(alphabet) for _ in range(rng.randint(length // 2, length + 50)))
            cases.add("code_sim_score", "long", prediction, truth)
            cases.add("code_sim_score", "long", mutate(rng, truth), truth)


def long_cases(rng, sources, cases):
    texts = [sources[path] for path in sorted(sources)]
    for index in range(4):
        words, following = word_window(rng, rng.choice(texts), rng.randint(1500, 3000))
        cases.add("rouge_score", "long", " ".join(words), " ".join(following))
        if index % 2 == 0:
            cases.add("qa_f1_score", "long", " ".join(words), " ".join(following[:100]))
        else:
            cases.add("count_score", "long", " ".join(words), str(rng.randint(0, 30)))
    # One sentence (no '.') against a short reference: the package's recursive LCS walk is as long as the
    # sentence, so from about 990 words it hits Python's recursion limit and LongBench scores 0.0.
    for count in [500, 989, 990, 991, 992, 1100]:
        sentence = " ".join(f"w{i}" for i in range(count))
        cases.add("rouge_score", "recursion", sentence, "w0")
        cases.add("rouge_score", "recursion", "w0 w1", sentence)
        cases.add("rouge_score", "recursion", sentence + " . w5 w7", "w3 w5 . w7")
    for _ in range(4):
        words, _ = word_window(rng, texts[-1].replace(".", ","), rng.randint(400, 700))
        other, _ = word_window(rng, texts[-1].replace(".", ","), rng.randint(400, 700))
        cases.add("rouge_score", "recursion", " ".join(words), " ".join(other))


def realistic(rng, outputs, sources, cases):
    texts = [sources[path] for path in sorted(sources)]
    for prompt, generated, reference in outputs:
        cases.add("rouge_score", "model", generated, reference)
        cases.add("qa_f1_score", "model", generated, reference)
        span, _ = word_window(rng, generated, rng.randint(1, 5))
        cases.add("qa_f1_score", "model_span", generated.lstrip("\n").split("\n")[0], " ".join(span))
        cases.add("count_score", "model", generated, str(rng.randint(0, 20)))
        if len(cases.rows) % 2 == 0:
            cases.add("code_sim_score", "model", generated, prompt)
    for _ in range(200):
        words, _ = word_window(rng, rng.choice(texts), rng.randint(1, 6))
        answer = " ".join(words)
        prediction = rng.choice([answer, mutate(rng, answer), f"The answer is {answer}.", answer.upper(),
                                 f"{answer}\nExplanation: it says so.", "unanswerable"])
        cases.add("qa_f1_score", "span", prediction, answer)
    for _ in range(90):
        summary, _ = word_window(rng, rng.choice(texts), rng.randint(15, 80))
        reference, _ = word_window(rng, rng.choice(texts), rng.randint(15, 80))
        cases.add("rouge_score", "summary", " ".join(summary), " ".join(reference))
        cases.add("rouge_score", "summary", mutate(rng, " ".join(reference)), " ".join(reference))
    for prompt, generated, _ in outputs[:120]:
        number = rng.randint(1, 30)
        cases.add("retrieval_score", "model", f"Paragraph {number}" if rng.random() < 0.3 else generated,
                  f"Paragraph {rng.choice([number, rng.randint(1, 30)])}")
        cases.add("classification_score", "model", generated, rng.choice(TREC_CLASSES), "trec")


def chinese_cases(rng, cases):
    def zh_text(k):
        return "".join(seeded_pick(rng, ZH_TEXT, k))
    for _ in range(120):
        reference = zh_text(rng.randint(1, 3))
        prediction = rng.choice([reference, zh_text(rng.randint(0, 3)), mutate(rng, reference),
                                 reference[: rng.randint(0, len(reference))], odd_mix(rng, 3) + reference])
        cases.add("qa_f1_zh_score", "zh", prediction, reference)
        cases.add("rouge_zh_score", "zh", prediction, reference)
    for odd in ODD_STRINGS[:30]:
        cases.add("qa_f1_zh_score", "odd", odd, zh_text(1))
        cases.add("rouge_zh_score", "odd", zh_text(1), odd)
    truths = ["段落12", "段落3", "段落１２", "段落 12", "答案是段落7。", "", "第5段"]
    predictions = ["段落12", "段落3", "12", "段落120", "段落12，段落3", "１２", "", "答案是段落7", "第十二段"]
    for truth in truths:
        for prediction in predictions:
            cases.add("retrieval_zh_score", "paragraph", prediction, truth)


def datasets(rng, cases):
    """LongBench prediction records for each of eval.py's data sets, drawn from the cases of its metric."""
    metric_of = {
        "narrativeqa": "qa_f1_score", "qasper": "qa_f1_score", "multifieldqa_en": "qa_f1_score",
        "multifieldqa_zh": "qa_f1_zh_score", "hotpotqa": "qa_f1_score", "2wikimqa": "qa_f1_score",
        "musique": "qa_f1_score", "dureader": "rouge_zh_score", "gov_report": "rouge_score",
        "qmsum": "rouge_score", "multi_news": "rouge_score", "vcsum": "rouge_zh_score",
        "trec": "classification_score", "triviaqa": "qa_f1_score", "samsum": "rouge_score",
        "lsht": "classification_score", "passage_count": "count_score",
        "passage_retrieval_en": "retrieval_score", "passage_retrieval_zh": "retrieval_zh_score",
        "lcc": "code_sim_score", "repobench-p": "code_sim_score",
    }
    records = []
    for name, metric in metric_of.items():
        pool = [row for row in cases.rows if row["metric"] == metric and row["group"] not in ("long", "recursion")]
        classes = TREC_CLASSES if name == "trec" else LSHT_CLASSES if name == "lsht" else None
        if name == "passage_retrieval_en":
            pool = [row for row in pool if re.search(r"Paragraph \d", row["ground_truth"])]
        if name == "passage_retrieval_zh":
            pool = [row for row in pool if re.search(r"段落\d", row["ground_truth"])]
        for _ in range(15):
            rows = seeded_pick(rng, pool, rng.randint(1, 3))
            prediction = rows[0]["prediction"]
            if classes:
                prediction = rng.choice(["", "\n"]) + "\n".join(seeded_pick(rng, classes, rng.randint(1, 3)))
                answers = [rng.choice(classes)]
            else:
                answers = [row["ground_truth"] for row in rows]
            if rng.random() < 0.3:
                prediction = "\n" * rng.randint(1, 2) + prediction + "\n" + rows[-1]["prediction"]
            records.append({"dataset": name, "pred": prediction, "answers": answers, "all_classes": classes})
    return records


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kvc-generate", default="build/bin/kvc-generate")
    parser.add_argument("--out", default="data/reference/longbench_scorer")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--model-outputs", type=int, default=200)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rng = random.Random(args.seed)
    sources = text_sources(root)
    outputs = model_outputs(rng, root, os.path.abspath(args.kvc_generate), sources, args.model_outputs)
    cases = Cases()
    adversarial(rng, cases)
    code_cases(rng, root, cases)
    long_cases(rng, sources, cases)
    realistic(rng, outputs, sources, cases)
    chinese_cases(rng, cases)
    os.makedirs(args.out, exist_ok=True)
    write_jsonl(os.path.join(args.out, "cases.jsonl"), [{k: v for k, v in row.items() if k != "group"}
                                                        for row in cases.rows])
    write_jsonl(os.path.join(args.out, "datasets.jsonl"), datasets(rng, cases))
    with open(os.path.join(args.out, "class_lists.json"), "w", encoding="utf-8") as f:
        json.dump(CLASS_LISTS, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases.rows)} cases")


if __name__ == "__main__":
    main()
