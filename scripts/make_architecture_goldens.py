#!/usr/bin/env python3
"""Random-weight checkpoints of every architecture kvc runs, with Hugging Face transformers' logits.

For each case a tiny checkpoint (a few hundred KB) is written to data/reference/architectures/<case>/ and
transformers (float32, eager attention) computes the logits of a fixed 24-token sequence at every position,
saved as logits.json next to it. tests/core/test_transformers_architectures.cpp runs kvc on the same
folders and compares.

  case                    made by                     what it exercises
  llama                   kvc-make-checkpoint         grouped-query attention, untied embeddings
  llama-rope-linear       kvc-make-checkpoint         rope_scaling linear (factor 2)
  llama-rope-llama3       kvc-make-checkpoint         rope_scaling llama3 (factor 8, original context 16)
  llama-rope-parameters   transformers save_pretrained  the same llama3 scaling as transformers 5 writes it
                                                      (rope_parameters), tied embeddings
  mistral-sliding-window  kvc-make-checkpoint         sliding_window 8 < 24 tokens
  qwen2-biases            kvc-make-checkpoint         q/k/v projection biases
  gemma3                  transformers save_pretrained  Gemma 3: (1 + w) norms, q/k norms, GeGLU, scaled
                                                      embeddings, query_pre_attn_scalar, 5 local : 1 global
                                                      layers with their own RoPE bases, tied embeddings

A developer tool (never needed by the build or the tests):

    python3 -m venv /tmp/venv-ref && /tmp/venv-ref/bin/pip install torch transformers safetensors
    /tmp/venv-ref/bin/python scripts/make_architecture_goldens.py [--kvc-bin build/bin]
"""
import argparse
import json
import pathlib
import shutil
import subprocess

import torch
import transformers

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "data" / "reference" / "architectures"
SEQ = 24
VOCAB = 64
INIT_STD = 0.5  # far above the usual 0.02: attention must be peaked for RoPE and windows to change the logits
COMMON = ["--hidden", "32", "--intermediate", "48", "--layers", "2", "--heads", "4", "--kv-heads", "2",
          "--head-dim", "8", "--vocab", str(VOCAB), "--context", "64", "--init-std", str(INIT_STD)]
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}

# name -> (model type, seed, config.json edits)
KVC_CASES = {
    "llama": ("llama", 1, {}),
    "llama-rope-linear": ("llama", 2, {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
    "llama-rope-llama3": ("llama", 3, {"rope_scaling": LLAMA3, "rope_theta": 500000.0}),
    "mistral-sliding-window": ("mistral", 4, {"sliding_window": 8}),
    "qwen2-biases": ("qwen2", 5, {}),
}


def kvc_checkpoint(kvc_bin, name, model_type, seed, edits):
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([str(kvc_bin / "kvc-make-checkpoint"), *COMMON, "--model-type", model_type, "--seed", str(seed),
                    "--out-dir", str(folder)], check=True, capture_output=True)
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    config.update(edits)
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    return folder


def randomize(model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, INIT_STD)


def transformers_llama(name, seed):
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64, tie_word_embeddings=True,
        rope_parameters={"rope_theta": 500000.0, **LLAMA3})
    model = transformers.LlamaForCausalLM(config)
    randomize(model, seed)
    return save(model, name)


def transformers_gemma3(name, seed):
    config = transformers.Gemma3TextConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=8,
        query_pre_attn_scalar=16, tie_word_embeddings=True, final_logit_softcapping=None,
        attn_logit_softcapping=None,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
    model = transformers.Gemma3ForCausalLM(config)
    randomize(model, seed)
    return save(model, name)


def save(model, name):
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "generation_config.json").unlink(missing_ok=True)
    return folder


def golden_logits(folder, seed):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32,
                                                              attn_implementation="eager")
    model.eval()
    ids = torch.randint(3, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(100 + seed)).tolist()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    return {"transformers": transformers.__version__, "torch": torch.__version__, "ids": ids,
            "logits": [[round(float(v), 7) for v in row] for row in logits]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvc-bin", default=str(REPO / "build" / "bin"), help="folder with kvc-make-checkpoint")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    folders = {}
    for name, (model_type, seed, edits) in KVC_CASES.items():
        folders[name] = (kvc_checkpoint(pathlib.Path(args.kvc_bin), name, model_type, seed, edits), seed)
    folders["llama-rope-parameters"] = (transformers_llama("llama-rope-parameters", 6), 6)
    folders["gemma3"] = (transformers_gemma3("gemma3", 7), 7)
    for name, (folder, seed) in folders.items():
        golden = golden_logits(folder, seed)
        (folder / "logits.json").write_text(json.dumps(golden) + "\n")
        print(f"{name}: {folder.relative_to(REPO)} ({sum(f.stat().st_size for f in folder.iterdir()):,} bytes)")


if __name__ == "__main__":
    main()
