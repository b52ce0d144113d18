# Sourced (POSIX sh or bash) by the recipes whose tables were measured on kvc-tiny-lm, the 2.4M-parameter
# needle model kept outside the repository (scripts/model_path.sh finds it), from the repository root or
# with ROOT set to it. needle_model prints the model to run: the repository's kvc-micro-lm under KVC_SMOKE
# (the README test suite runs every recipe small, without ../shared), else $MODEL when set, else kvc-tiny-lm.
needle_model() {
  if [ -n "${KVC_SMOKE:-}" ]; then
    echo "${ROOT:-.}/data/models/kvc-micro-lm"
  elif [ -n "${MODEL:-}" ]; then
    echo "$MODEL"
  else
    "${ROOT:-.}/scripts/model_path.sh" kvc-tiny-lm
  fi
}
