# Sourced (POSIX sh or bash) by the recipes whose kvc-eval sweeps write into data/results. The repository
# holds a sweep folder's results.jsonl gzipped, as results.jsonl.gz (every sample's record: a megabyte of
# JSON that gzips to a tenth); the plain file is the sweep's working copy and is not committed.
# A sweep stopped part way (hours on the real models) can be carried to another clone the same way: its
# per-sample checkpoint samples.jsonl, gzipped as samples.jsonl.gz, resumes there at the next sample.
# unpack_results DIR   before a sweep: DIR/results.jsonl from DIR/results.jsonl.gz when DIR has no
#                      results.jsonl, and DIR/samples.jsonl from DIR/samples.jsonl.gz likewise, so the
#                      sweep resumes from the committed cells and samples
# pack_results DIR     after it: DIR/results.jsonl gzipped into DIR/results.jsonl.gz (-n: the same cells
#                      give the same bytes), replacing both; the finished sweep's samples are in results.jsonl,
#                      so a carried DIR/samples.jsonl.gz is removed
# save_progress DIR    after stopping a sweep: DIR/samples.jsonl gzipped into DIR/samples.jsonl.gz (the plain
#                      file stays, the sweep's working copy)
unpack_results() {
  if [ ! -f "$1/results.jsonl" ] && [ -f "$1/results.jsonl.gz" ]; then
    gzip -dc "$1/results.jsonl.gz" > "$1/results.jsonl"
  fi
  if [ ! -f "$1/samples.jsonl" ] && [ -f "$1/samples.jsonl.gz" ]; then
    gzip -dc "$1/samples.jsonl.gz" > "$1/samples.jsonl"
  fi
}
pack_results() {
  if [ -f "$1/results.jsonl" ]; then gzip -9nf "$1/results.jsonl"; fi
  rm -f "$1/samples.jsonl.gz"
}
save_progress() {
  if [ -f "$1/samples.jsonl" ]; then
    gzip -9nc "$1/samples.jsonl" > "$1/samples.jsonl.gz.part" && mv "$1/samples.jsonl.gz.part" "$1/samples.jsonl.gz"
  fi
}
