# Sourced by the recipes that build a random-weight benchmark checkpoint (ROOT set): the tokenizer it is
# built with is the Llama-2 one when the optional ../shared (or KVC_SHARED) has it, else kvc-micro-lm's
# with a vocabulary of its size; --prompt-tokens fixes the context length either way.
# Sets TOKENIZER (unless given) and VOCAB, the extra kvc-make-checkpoint flags.
TOKENIZER=${TOKENIZER:-${KVC_SHARED:-$ROOT/../shared}/models/llama2-tokenizer.model}
VOCAB=()
if [ ! -f "$TOKENIZER" ]; then TOKENIZER=$ROOT/data/models/kvc-micro-lm/tokenizer.model; VOCAB=(--vocab 2048); fi
