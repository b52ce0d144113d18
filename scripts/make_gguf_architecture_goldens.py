#!/usr/bin/env python3
"""Llama and Qwen2 GGUF files written by llama.cpp's own converter, with transformers' logits.

For each case, a tiny random-weight Hugging Face checkpoint is made with transformers (the SentencePiece
vocabulary of data/models/stories260K, 512 tokens), converted to a float32 GGUF by llama.cpp's
convert_hf_to_gguf.py (which permutes Llama's q/k rows for its RoPE layout and turns llama3 RoPE scaling
into a rope_freqs tensor), and transformers computes the logits of a fixed 24-token sequence on the
Hugging Face checkpoint. Written to data/reference/gguf-architectures/<case>.{gguf,logits.safetensors};
tests/core/test_transformers_architectures.cpp runs kvc on the GGUF and compares.

  case                what it exercises
  llama               q/k row permutation with grouped-query attention (4 heads, 2 KV heads)
  llama-rope-llama3   llama3 RoPE scaling as llama.cpp stores it (rope_freqs.weight), tied embeddings
  qwen2               q/k/v biases, no permutation

A developer tool (never needed by the build or the tests):

    python3 -m venv /tmp/venv-ref && /tmp/venv-ref/bin/pip install torch transformers safetensors sentencepiece gguf
    /tmp/venv-ref/bin/python scripts/make_gguf_architecture_goldens.py --llama-cpp $(dirname $(scripts/build_llama_cpp.sh))/..
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import save_file

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "data" / "reference" / "gguf-architectures"
SEQ = 24
VOCAB = 512
INIT_STD = 0.5  # attention must be peaked for RoPE to change the logits
SHAPE = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, max_position_embeddings=64, bos_token_id=1, eos_token_id=2)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16, "rope_theta": 500000.0}

CASES = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, dict(tie_word_embeddings=False), 11),
    "llama-rope-llama3": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
                          dict(tie_word_embeddings=True, rope_parameters=LLAMA3), 12),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, dict(tie_word_embeddings=False), 13),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source folder (with convert_hf_to_gguf.py)")
    args = ap.parse_args()
    converter = pathlib.Path(args.llama_cpp) / "convert_hf_to_gguf.py"
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (config_class, model_class, extra, seed) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            folder = pathlib.Path(tmp) / name
            config = config_class(**SHAPE, **extra)
            model = model_class(config)
            torch.manual_seed(seed)
            with torch.no_grad():
                for p in model.parameters():
                    p.normal_(0.0, INIT_STD)
            model.save_pretrained(folder, safe_serialization=True)
            shutil.copy(REPO / "data/models/stories260K/tokenizer.model", folder / "tokenizer.model")
            gguf = OUT / f"{name}.gguf"
            subprocess.run([sys.executable, str(converter), str(folder), "--outtype", "f32", "--outfile", str(gguf)],
                           check=True, capture_output=True)
            reference = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                                          attn_implementation="eager").eval()
            ids = torch.randint(3, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(100 + seed))
            with torch.no_grad():
                logits = reference(ids.unsqueeze(0)).logits[0].contiguous()
            save_file({"ids": ids.to(torch.int32), "logits": logits}, str(OUT / f"{name}.logits.safetensors"),
                      metadata={"transformers": transformers.__version__, "torch": torch.__version__,
                                "converter": "llama.cpp convert_hf_to_gguf.py --outtype f32"})
            print(f"{name}: {gguf.relative_to(REPO)} ({gguf.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
