# Sourced by the recipes that train on the essays and evaluate on held-out essays, from the repository
# root. split_essays TRAIN EVAL [BYTES] writes the first 4/5 of the essays (of their first BYTES, when
# given: a smoke run's few short windows need no more) to TRAIN and the rest to EVAL.
split_essays() {
  local all total
  all=$(mktemp)
  cat data/text/pg_essays/*.txt > "$all"
  total=$(wc -c < "$all")
  if [ -n "${3:-}" ] && [ "$3" -lt "$total" ]; then total=$3; fi
  head -c $((total * 4 / 5)) "$all" > "$1"
  head -c "$total" "$all" | tail -c +$((total * 4 / 5 + 1)) > "$2"
  rm -f "$all"
}
