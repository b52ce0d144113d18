# Sourced (POSIX sh or bash) by the recipes whose kvc-eval sweeps write into data/results. The repository
# holds a sweep folder's results.jsonl gzipped, as results.jsonl.gz (every sample's record: a megabyte of
# JSON that gzips to a tenth); the plain file is the sweep's working copy and is not committed.
# unpack_results DIR   before a sweep: DIR/results.jsonl from DIR/results.jsonl.gz when DIR has no
#                      results.jsonl, so the sweep resumes from the committed cells
# pack_results DIR     after it: DIR/results.jsonl gzipped into DIR/results.jsonl.gz (-n: the same cells
#                      give the same bytes), replacing both
unpack_results() {
  if [ ! -f "$1/results.jsonl" ] && [ -f "$1/results.jsonl.gz" ]; then
    gzip -dc "$1/results.jsonl.gz" > "$1/results.jsonl"
  fi
}
pack_results() {
  if [ -f "$1/results.jsonl" ]; then gzip -9nf "$1/results.jsonl"; fi
}
