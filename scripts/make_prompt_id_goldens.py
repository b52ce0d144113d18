#!/usr/bin/env python3
"""The ids llama.cpp gives a prompt (llama-tokenize with its own BOS rule: the file's add_bos_token) for the
real GGUF models scripts/setup.sh installs, so that the tools' prompts can be checked against them: SmolLM2
says add_bos_token = false, Gemma 3 says true. Writes data/reference/prompt_ids.json; tests/cli/test_cli.cpp
(PromptIds) compares the prompt ids of kvc-generate and kvc-eval ppl with it.

  python3 scripts/make_prompt_id_goldens.py --llama-tokenize $(scripts/build_llama_cpp.sh)/llama-tokenize
Needs only llama.cpp's llama-tokenize."""
import argparse
import json
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "reference" / "prompt_ids.json"
TEXTS = [
    "The capital of France is Paris.",
    "In 1969, 3 astronauts flew 384,400 km.\nThen they came back.\n",
    (ROOT / "data" / "text" / "wikitext2" / "wiki.test.raw").read_text(encoding="utf-8")[:2000],
]


def ids(tool, gguf, text):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt") as f:
        f.write(text.encode("utf-8"))
        f.flush()
        out = subprocess.run([tool, "-m", gguf, "-f", f.name, "--ids", "--no-escape", "--log-disable"],
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-tokenize", required=True)
    args = ap.parse_args()
    models = {}
    for name in ("smollm2-135m", "gemma3-270m"):
        gguf = subprocess.run([str(ROOT / "scripts" / "model_path.sh"), name], check=True, capture_output=True,
                              text=True).stdout.strip()
        models[name] = [{"text": t, "ids": ids(args.llama_tokenize, gguf, t)} for t in TEXTS]
    OUT.write_text(json.dumps({"reference": "llama.cpp llama-tokenize --no-escape (its BOS rule)", "models": models},
                              ensure_ascii=False) + "\n", encoding="utf-8")
    for name, cases in models.items():
        print(name, [c["ids"][:3] for c in cases])


if __name__ == "__main__":
    main()
