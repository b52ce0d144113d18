#!/usr/bin/env bash
# Fault and abuse harness for the kvc tools: runs them on stories260K with outputs on their inputs, on
# devices, on a full disk, with names that try to become commands, on damaged files, under kill -9 and
# with bad flag values, and counts per class the inputs tried, crashes, hangs, garbage, leftovers,
# untidy errors and failures. Prints the markdown table and writes it (atomically) to
# data/results/hardening/faults.md.
#
#   scripts/fault_injection.sh
#
# Knobs (environment):
#   KVC_FAULT_SEED=1          seed of the mutations and the kill delays
#   KVC_FAULT_MUTATIONS=10    damaged copies per file kind (class 4)
#   KVC_FAULT_KILLS=4         kill -9 runs per writer (class 5)
#   KVC_FAULT_TIMEOUT=60      seconds before a run counts as a hang
#   KVC_FAULT_VMEM_KB=8388608 address space of every run (ulimit -v), so a runaway allocation fails
#                             instead of exhausting the machine
#   KVC_FAULT_TABLE=PATH      where the table goes (default data/results/hardening/faults.md; '-' = print only)
#   KVC_FAULT_KEEP=1          keep the work folder (its path is printed) to rerun a finding's command
#   KVC_BIN=DIR               the tools (default build/bin)
# Needs bash, coreutils, python3 (standard library only); class 6 needs root to mount a 1 MiB tmpfs.
set -uo pipefail  # no -e: most of these commands are meant to fail
cd "$(dirname "$0")/.."
REPO=$PWD
BIN=$(cd "${KVC_BIN:-build/bin}" && pwd) || { echo "fault_injection.sh: no tools in ${KVC_BIN:-build/bin}" >&2; exit 1; }
SEED=${KVC_FAULT_SEED:-1}
MUTATIONS=${KVC_FAULT_MUTATIONS:-10}
KILLS=${KVC_FAULT_KILLS:-4}
TIMEOUT=${KVC_FAULT_TIMEOUT:-60}
VMEM_KB=${KVC_FAULT_VMEM_KB:-8388608}
TABLE=${KVC_FAULT_TABLE:-data/results/hardening/faults.md}
export PATH="$BIN:$PATH"
for tool in kvc-generate kvc-calibrate kvc-train kvc-cluster kvc-profile kvc-eval kvc-tokenize kvc-bench kvc-make-checkpoint; do
  [[ -x "$BIN/$tool" ]] || { echo "fault_injection.sh: $BIN/$tool is missing; build the tools first" >&2; exit 1; }
done

W=$(mktemp -d "${TMPDIR:-/tmp}/kvc-faults.XXXXXX")
FULL=$W/full  # class 6's tmpfs
cleanup() {
  mountpoint -q "$FULL" 2>/dev/null && umount "$FULL"
  if [[ "${KVC_FAULT_KEEP:-0}" == 1 ]]; then echo "work folder kept: $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
START=$SECONDS

IN=$W/in          # every input file lives here (hashed before and after each run)
M=$IN/m           # a private copy of the model
T=$IN/text.txt    # a private copy of the training/prompt text
ART=$IN/art       # artifacts: bases, gates, a checkpoint, a cluster store and its index
PRISTINE=$W/pristine
FINDINGS=$W/findings.md
PY=$W/faults.py
mkdir -p "$W/run" "$W/log" "$ART"
: >"$FINDINGS"

# ---- the Python helper: mutations and kill -9 ----------------------------------------------------
cat >"$PY" <<'PYEOF'
import json, os, random, re, signal, struct, subprocess, sys, time

def varint(b, i):
    shift = value = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("varint")
        c = b[i]; i += 1
        value |= (c & 0x7F) << shift; shift += 7
        if not c & 0x80:
            return value, i

# Wire-format framing of a protobuf message; `known` maps field numbers of length-delimited fields that
# are themselves messages to their own `known` map (SentencePiece's ModelProto, as far as it nests).
def framing_ok(b, known, end_group=None):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field 0")
        if wire == 0:
            _, i = varint(b, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise ValueError("length past the end")
            if field in known:
                framing_ok(b[i:i + n], known[field])
            i += n
        elif wire == 3:  # a group: skip to its end tag
            depth = 1
            while depth:
                k, i = varint(b, i)
                if k & 7 == 3: depth += 1
                elif k & 7 == 4: depth -= 1
                elif k & 7 == 0: _, i = varint(b, i)
                elif k & 7 == 1: i += 8
                elif k & 7 == 5: i += 4
                elif k & 7 == 2:
                    n, i = varint(b, i); i += n
                else: raise ValueError("wire type")
        else:
            raise ValueError("wire type %d" % wire)
        if i > len(b):
            raise ValueError("field past the end")
    return True

SPM = {1: {}, 2: {}, 3: {}, 4: {1: {}}, 5: {}}  # pieces, trainer/normalizer spec, self-test samples, denormalizer

def tensors_of(header):
    return {k: v for k, v in header.items() if k != "__metadata__"}

def safetensors_header(b):
    n = struct.unpack("<Q", b[:8])[0]
    if n > len(b) - 8:
        raise ValueError("header length past the end")
    h = json.loads(b[8:8 + n].decode("utf-8"))
    if not isinstance(h, dict):
        raise ValueError("header not an object")
    return n, h

# Is this file's damage one the format promises to detect ("must") or may it load ("may", with why)?
def judge(fmt, orig, new, op, offsets):
    if op == "truncate":
        if fmt == "tokenizer":
            try:
                framing_ok(new, SPM)
                return "may", "cut at a field boundary: a valid shorter message"
            except ValueError:
                return "must", "protobuf cut mid-field"
        return "must", "file cut short"
    if fmt in ("checkpoint", "store"):
        return "must", "every byte is covered (%s)" % ("checksum trailer" if fmt == "checkpoint" else "page CRCs, zero padding, digests")
    if fmt == "json":
        try:
            a, b = json.loads(orig.decode("utf-8")), json.loads(new.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return "must", "not JSON any more"
        return ("may", "valid JSON, same values") if a == b else ("may", "valid JSON with other values")
    if fmt == "tokenizer":
        try:
            framing_ok(new, SPM)
        except ValueError:
            return "must", "protobuf framing broken"
        return "may", "undetectable: piece text/score bytes"
    if fmt == "safetensors":
        n, h = safetensors_header(orig)
        # A file kvc wrote carries kvc.checksum over its header's content and its data.
        sealed = "kvc.checksum" in (h.get("__metadata__") or {})
        if all(o >= 8 + n for o in offsets):
            return ("must", "weight bytes (kvc.checksum)") if sealed else ("may", "undetectable: weight bytes")
        try:
            n2, h2 = safetensors_header(new)
        except (UnicodeDecodeError, ValueError, struct.error):
            return "must", "header no longer parses"
        if n2 != n or tensors_of(h2) != tensors_of(h):
            return "must", "tensor table changed"
        if h2.get("__metadata__") != h.get("__metadata__"):
            return ("must", "a metadata string (kvc.checksum)") if sealed else ("may", "undetectable: a metadata string")
        return "may", "header whitespace, same table"
    raise SystemExit("unknown format " + fmt)

def mutate(fmt, src, dst, seed):
    rnd = random.Random(seed)
    b = open(src, "rb").read()
    new = bytearray(b)
    header_end = 8 + struct.unpack("<Q", b[:8])[0] if fmt == "safetensors" else len(b)
    r = rnd.random()
    offsets = []
    if r < 0.3:
        op = "truncate"
        cut = rnd.randrange(0, len(b))
        new = new[:cut]
        offsets = [cut]
    else:
        op = "flip"
        # Safetensors: half the flips go into the header, which is under 1% of a weights file.
        span = header_end if fmt == "safetensors" and r < 0.65 else len(b)
        for _ in range(rnd.randint(1, 3)):
            at = rnd.randrange(0, span)
            new[at] ^= rnd.randint(1, 255)
            offsets.append(at)
    open(dst, "wb").write(bytes(new))
    promise, why = judge(fmt, b, bytes(new), op, offsets)
    where = ("cut at %d of %d" % (offsets[0], len(b))) if op == "truncate" else ("flip at " + ",".join(map(str, sorted(offsets))))
    print("%s\t%s\t%s" % (promise, why, where))

# Starts a command and kills it with SIGKILL: after `param` seconds (mode delay) or `param` seconds after
# a temporary output file (.NAME.tmp.PID.N) first appears in `watch` (mode ontmp).
def kill(mode, param, watch, out, err, argv):
    pattern = re.compile(r"^\..*\.tmp\.\d+\.\d+$")
    with open(out, "wb") as o, open(err, "wb") as e:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        saw = False
        if mode == "delay":
            deadline = t0 + param
            while time.monotonic() < deadline and p.poll() is None:
                saw = saw or any(pattern.match(f) for f in os.listdir(watch))
                time.sleep(0.0005)
        else:
            while p.poll() is None and time.monotonic() - t0 < 60:
                if any(pattern.match(f) for f in os.listdir(watch)):
                    saw = True
                    time.sleep(param)
                    break
                time.sleep(0.0002)
        killed = p.poll() is None
        if killed:
            p.send_signal(signal.SIGKILL)
        rc = p.wait()
    print(json.dumps({"killed": killed, "saw_tmp": saw, "rc": rc, "seconds": round(time.monotonic() - t0, 3)}))

# A safetensors file whose header parses and whose tensors end where the file ends.
def whole(path):
    b = open(path, "rb").read()
    n, h = safetensors_header(b)
    end = max([v["data_offsets"][1] for v in tensors_of(h).values()] + [0])
    sys.exit(0 if 8 + n + end == len(b) else 1)

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "mutate":
        mutate(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif cmd == "kill":
        kill(sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7:])
    elif cmd == "whole":
        try:
            whole(sys.argv[2])
        except (OSError, ValueError, KeyError, TypeError, struct.error):
            sys.exit(1)
    elif cmd == "uniform":  # seed lo hi
        print("%.4f" % random.Random(sys.argv[2]).uniform(float(sys.argv[3]), float(sys.argv[4])))
PYEOF

# ---- bookkeeping --------------------------------------------------------------------------------
declare -A COUNT NOTE
CLASS_NAME=([1]="output = input" [2]="device outputs (/dev/full)" [3]="names that try to become commands"
            [4]="damaged input files" [5]="kill -9 during writes" [6]="full disk (1 MiB tmpfs)"
            [7]="abusive command lines")
CATEGORIES=(tried crash hang garbage leftover untidy failed)
CASE_N=0 D_USED=1 CASE_CLASS=0 CASE_LABEL="" CASE_CMD="" CASE_FLAGS="" RC=0 ERRF="" OUTF=""

show_cmd() {  # the command as a shell line, the work folder spelled $W
  local s="" a
  for a in "$@"; do s+="$(printf '%q' "$a") "; done
  s=${s% }
  s=${s//"$W"/'$W'}
  printf '%s' "$s"
}
first_err() { tr -d '\r' <"$ERRF" | grep -v '^$' | tail -n 1 | cut -c1-240 | tr -d '\n' | LC_ALL=C tr -c '[:print:]' '?'; }
note() { NOTE[$1]+="${NOTE[$1]:+; }$2"; }

# flag CATEGORY MESSAGE: a problem with the current case, counted once per case and category.
flag() {
  local cat=$1 msg=$2
  if [[ " $CASE_FLAGS " != *" $cat "* ]]; then
    CASE_FLAGS+=" $cat"
    COUNT[$CASE_CLASS,$cat]=$(( ${COUNT[$CASE_CLASS,$cat]:-0} + 1 ))
  fi
  { printf -- '- **%s**, class %s (%s), case %s: %s\n\n  ```sh\n  %s\n  ```\n\n' "$cat" "$CASE_CLASS" \
      "${CLASS_NAME[$CASE_CLASS]}" "$CASE_LABEL" "${msg//"$W"/'$W'}" "$CASE_CMD"; } >>"$FINDINGS"
}

new_case() { CASE_N=$((CASE_N + 1)); D=$W/run/$CASE_N; mkdir -p "$D"; D_USED=0; }

hash_inputs() { find "$IN" "$D" -type f ! -path "$D/.case/*" -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum; }
list_files() { local d; for d in "$@"; do [[ -d "$d" ]] && find "$d" \( -type f -o -type l \) ! -path "$D/.case/*" 2>/dev/null; done | sort; }
tmp_files() { local d; for d in "$@"; do [[ -d "$d" ]] && find "$d" -name '.*.tmp.*' ! -path "$D/.case/*" 2>/dev/null; done | sort; }

# An error as docs/tools.md promises it: one line "tool: error: ..." and, unless strict, only
# progress or a summary before it; never a LibTorch trace.
tidy_error() {
  local strict=$1 lines errs last
  lines=$(tr -d '\r' <"$ERRF" | grep -c '')
  errs=$(grep -c ': error: ' "$ERRF")
  last=$(tr -d '\r' <"$ERRF" | tail -n 1)
  grep -qE 'Exception raised from|frame #[0-9]' "$ERRF" && return 1
  if [[ $strict == 1 ]]; then [[ $lines == 1 && $errs == 1 ]]; else [[ $errs == 1 && $last == *": error: "* ]]; fi
}

SANITIZER='AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|ThreadSanitizer|runtime error:|Segmentation fault|core dumped|terminate called|double free or corruption|free\(\): invalid|malloc\(\): |stack smashing|Assertion .* failed|Floating point exception|Bus error|Illegal instruction'

# run_case CLASS EXPECT LABEL COMMAND...
#   EXPECT: fail (an error is due), ok (it must work), any (either; judged by the caller)
#   @D@ in an argument is the case's own folder (its working directory and output folder).
#   Optional, as VAR=... before the call: STDOUT_TO (file for standard output), STRICT=1 (stderr must be
#   exactly one line), MAY_CHANGE (an input the run may rewrite: a checkpoint it resumes), WATCH (more
#   folders whose new files after a failure are leftovers), WATCH_TMP (folders searched only for .*.tmp.*
#   files).
# Sets RC, ERRF, OUTF, D for the caller's own checks.
run_case() {
  local class=$1 expect=$2 label=$3; shift 3
  [[ $D_USED == 1 ]] && new_case
  D_USED=1
  local args=() a
  for a in "$@"; do args+=("${a//@D@/$D}"); done
  CASE_CLASS=$class CASE_LABEL=$label CASE_FLAGS="" CASE_CMD="cd $(show_cmd "$D") && $(show_cmd "${args[@]}")"
  [[ -n "${STDOUT_TO:-}" ]] && CASE_CMD+=" > $(show_cmd "$STDOUT_TO")"
  COUNT[$class,tried]=$(( ${COUNT[$class,tried]:-0} + 1 ))
  mkdir -p "$D/.case"
  OUTF=$D/.case/out ERRF=$D/.case/err
  local before_hash before_files after_files t0=$SECONDS
  before_hash=$(hash_inputs)
  before_files=$(list_files "$D" "$IN" ${WATCH:-})
  (cd "$D" && ulimit -v "$VMEM_KB" && exec timeout -k 5 "$TIMEOUT" "${args[@]}" >"${STDOUT_TO:-$OUTF}" 2>"$ERRF" </dev/null)
  RC=$?
  local elapsed=$((SECONDS - t0))
  if [[ ($RC == 124 || $RC == 137) && $elapsed -ge $TIMEOUT ]]; then
    flag hang "no exit after ${TIMEOUT} s"
  elif (( RC >= 128 && RC != 130 )); then
    flag crash "exit status $RC (signal $((RC - 128))): $(first_err)"
  elif grep -qE "$SANITIZER" "$ERRF"; then
    flag crash "exit status $RC with a crash report on stderr: $(grep -m1 -E "$SANITIZER" "$ERRF" | cut -c1-200)"
  elif [[ $expect == fail && $RC == 0 ]]; then
    flag garbage "exit 0 where an error was due"
  elif [[ $expect == ok && $RC != 0 ]]; then
    flag failed "exit $RC where it should work: $(first_err)"
  elif [[ $expect == fail ]] && ! tidy_error "${STRICT:-0}"; then
    flag untidy "exit $RC but not a one-line error: $(tr -d '\r' <"$ERRF" | grep -v '^$' | head -c 300 | tr '\n' '|' | LC_ALL=C tr -c '[:print:]' '?')"
  fi
  if [[ ${STRICT:-0} == 1 && $RC != 0 && $RC != 1 && $RC != 2 && $RC -lt 124 ]]; then
    flag untidy "exit $RC, not 1 or 2: $(first_err)"
  fi
  local changed
  changed=$(diff <(echo "$before_hash") <(hash_inputs) | grep '^<' | awk '{print $3}' | grep -vxF "${MAY_CHANGE:-/nonexistent}" |
            sed "s#$W#\$W#g" | tr '\n' ' ')
  if [[ -n "$changed" ]]; then
    flag garbage "an input changed: $changed"
    rm -rf "$IN" && cp -a "$PRISTINE" "$IN"
  fi
  after_files=$(list_files "$D" "$IN" ${WATCH:-})
  local left
  left=$(tmp_files "$D" "$IN" ${WATCH:-} ${WATCH_TMP:-})
  if [[ $RC != 0 ]]; then
    # (not the empty .NAME.lock files of flock(2) locks, which stay by design: lib/util/output_lock.h)
    left+=$'\n'$(comm -13 <(echo "$before_files") <(echo "$after_files") | grep -vxF "${STDOUT_TO:-/nonexistent}" | grep -v '/\.[^/]*\.lock$')
  fi
  left=$(echo "$left" | grep -v '^$' | sort -u | sed "s#$W#\$W#g" | tr '\n' ' ')
  [[ -n "$left" ]] && flag leftover "left after exit $RC: $left"
  return 0
}

# ---- setup: the model, the text and the artifacts the tools read ---------------------------------
PROMPT='Once upon a time there was a little girl named Lily. She liked to play in the park with her dog.'
TRAIN_FLAGS=(--alpha 2 --steps 4 --warmup 1 -c 32 --batch 1 --eval-every 1 --eval-windows 1 -t 1 --checkpoint-every 1)
setup() {
  cp -r "$REPO/data/models/stories260K" "$M"
  cp "$REPO/data/text/tinystories/tinystories_excerpt_30k.txt" "$T"
  local log=$W/log/setup.err
  kvc-calibrate -m "$M" -f "$T" --tokens 2000 -c 128 -t 1 -o "$ART/bases.safetensors" 2>"$log" >/dev/null &&
    kvc-calibrate -m "$M" -f "$T" --tokens 1000 -c 128 -t 1 -o "$ART/bases_old.safetensors" 2>>"$log" >/dev/null &&
    kvc-train -m "$M" --bases "$ART/bases.safetensors" -f "$T" "${TRAIN_FLAGS[@]}" -o "$ART/gates.safetensors" 2>>"$log" >/dev/null &&
    kvc-train -m "$M" --bases "$ART/bases.safetensors" -f "$T" "${TRAIN_FLAGS[@]}" --checkpoint "$ART/g.ckpt" --stop-after 1 2>>"$log" >/dev/null &&
    kvc-cluster build -m "$M" -p "$PROMPT" --store "$ART/s.kvs" --index "$ART/s.safetensors" 2>>"$log" >/dev/null &&
    kvc-cluster build -m "$M" -f "$T" --prompt-tokens 400 --store "$ART/long.kvs" --index "$ART/long.safetensors" 2>>"$log" >/dev/null ||
    { echo "fault_injection.sh: setup failed:" >&2; cat "$log" >&2; exit 1; }
  printf 'not really bases, but a user'"'"'s file' >"$IN/b.safetensors"
  printf 'keep me' >"$IN/x"
  ln -s "$M/model.safetensors" "$IN/link.safetensors"
  ln "$M/model.safetensors" "$IN/hardlink.safetensors"
  ln -s "$M/config.json" "$IN/config-link.json"
  cp -a "$IN" "$PRISTINE"
}

# ---- 1. output = input ---------------------------------------------------------------------------
class_output_is_input() {
  local gen=(kvc-generate -m "$M" -p Once -n 2 -t 1)
  local cal=(kvc-calibrate -m "$M" -f "$T" --tokens 64 -t 1)
  local train=(kvc-train -m "$M" -f "$T" --steps 1 -c 32 -t 1)
  local build=(kvc-cluster build -m "$M" -p "$PROMPT")
  run_case 1 fail "generate --json-out m/config.json" "${gen[@]}" --json-out "$M/config.json"
  run_case 1 fail "generate --json-out a link to m/config.json" "${gen[@]}" --json-out "$IN/config-link.json"
  run_case 1 fail "calibrate -o m/model.safetensors" "${cal[@]}" -o "$M/model.safetensors"
  run_case 1 fail "calibrate -o a symlink to the weights" "${cal[@]}" -o "$IN/link.safetensors"
  run_case 1 fail "calibrate -o a hard link to the weights" "${cal[@]}" -o "$IN/hardlink.safetensors"
  run_case 1 fail "calibrate -o m/../m/model.safetensors" "${cal[@]}" -o "$M/../m/model.safetensors"
  run_case 1 fail "calibrate -o its own -f text" "${cal[@]}" -o "$T"
  run_case 1 fail "train --bases b -o b" "${train[@]}" --bases "$IN/b.safetensors" -o "$IN/b.safetensors"
  run_case 1 fail "train --bases B -o B (real bases)" "${train[@]}" --bases "$ART/bases.safetensors" -o "$ART/bases.safetensors"
  run_case 1 fail "train --checkpoint g -o g" "${train[@]}" --bases "$ART/bases.safetensors" --checkpoint @D@/g -o @D@/g
  run_case 1 fail "train --checkpoint on its --bases" "${train[@]}" --bases "$ART/bases.safetensors" --checkpoint "$ART/bases.safetensors" -o @D@/o.safetensors
  run_case 1 fail "train -o m/model.safetensors" "${train[@]}" --bases "$ART/bases.safetensors" -o "$M/model.safetensors"
  run_case 1 fail "cluster build --index m/model.safetensors" "${build[@]}" --store @D@/s.kvs --index "$M/model.safetensors"
  run_case 1 fail "cluster build --store m/model.safetensors" "${build[@]}" --store "$M/model.safetensors" --index @D@/i.safetensors
  run_case 1 fail "cluster build --store X --index X" "${build[@]}" --store "$IN/x" --index "$IN/x"
  run_case 1 fail "cluster build --index m/tokenizer.model" "${build[@]}" --store @D@/s.kvs --index "$M/tokenizer.model"
  run_case 1 fail "generate --retrieval-store m/model.safetensors" "${gen[@]}" --retrieval adaptive --retrieval-store "$M/model.safetensors"
  run_case 1 fail "generate --lowrank G --json-out G" "${gen[@]}" --lowrank "$ART/gates.safetensors" --json-out "$ART/gates.safetensors"
  run_case 1 fail "generate -f text --json-out text" kvc-generate -m "$M" -f "$T" -c 64 -n 2 -t 1 --json-out "$T"
}

# ---- 2. device outputs ---------------------------------------------------------------------------
check_dev_full() {
  if ! test -c /dev/full; then
    flag garbage "/dev/full is no longer a character device"
    rm -f /dev/full && mknod -m 666 /dev/full c 1 7
  fi
}
# dev_case LABEL COMMAND...: an error due; /dev/full stays a device and no .*.tmp.* appears in /dev.
dev_case() {
  local label=$1; shift
  WATCH_TMP=/dev run_case 2 fail "$label" "$@"
  check_dev_full
}
class_devices() {
  local gen=(kvc-generate -m "$M" -p Once -n 2 -t 1 -q)
  dev_case "generate --retrieval-store /dev/full" "${gen[@]}" --retrieval adaptive --retrieval-store /dev/full
  dev_case "cluster build --store /dev/full" kvc-cluster build -m "$M" -p "$PROMPT" --store /dev/full --index @D@/i.safetensors
  dev_case "cluster build --index /dev/full" kvc-cluster build -m "$M" -p "$PROMPT" --store @D@/s.kvs --index /dev/full
  dev_case "generate --json-out /dev/full" "${gen[@]}" --json-out /dev/full
  dev_case "calibrate -o /dev/full" kvc-calibrate -m "$M" -f "$T" --tokens 64 -t 1 -o /dev/full
  dev_case "train -o /dev/full" kvc-train -m "$M" -f "$T" --bases "$ART/bases.safetensors" --steps 1 -c 32 -t 1 -o /dev/full
  dev_case "train --checkpoint /dev/full" kvc-train -m "$M" -f "$T" --bases "$ART/bases.safetensors" --steps 2 -c 32 -t 1 --checkpoint /dev/full --stop-after 1
  dev_case "bench --json-out /dev/full" kvc-bench -m "$M" --contexts 32 -t 1 --json-out /dev/full
  STDOUT_TO=/dev/full dev_case "tokenize > /dev/full" kvc-tokenize -m "$M" -p 'Once upon a time'
  STDOUT_TO=/dev/full dev_case "eval ppl --json > /dev/full" kvc-eval ppl -m "$M" -f "$T" -c 64 --max-windows 1 -t 1 --json
  STDOUT_TO=/dev/full dev_case "calibrate -o - > /dev/full" kvc-calibrate -m "$M" -f "$T" --tokens 64 -t 1 -o -
  dev_case "profile --out-dir /dev/full" kvc-profile -m "$M" -f "$T" -c 64 --windows 1 --out-dir /dev/full
  dev_case "cluster replay --out-dir /dev/full" kvc-cluster replay -m "$M" -p "$PROMPT" -n 2 -s adaptive --out-dir /dev/full
  dev_case "make-checkpoint -o /dev/full" kvc-make-checkpoint --hidden 16 --intermediate 32 --layers 1 --heads 2 --kv-heads 1 --head-dim 8 --vocab 64 -o /dev/full
}

# ---- 3. names that try to become commands --------------------------------------------------------
pwned() {
  { find "$W" \( -name 'PWNED*' -o -name 'P[0-9]*' \) -newer "$PY"
    find "$REPO" "${TMPDIR:-/tmp}" -maxdepth 1 \( -name 'PWNED*' -o -name 'P[0-9]*' \) -newer "$PY"; } 2>/dev/null |
    sed "s#$W#\$W#g" | tr '\n' ' '
}
check_pwned() {
  local found; found=$(pwned)
  if [[ -n "$found" ]]; then flag garbage "a name ran as a command: $found"; find "$W" \( -name 'PWNED*' -o -name 'P[0-9]*' \) -newer "$PY" -delete; fi
}
expect_dir() { [[ -d "$D/$1" ]] || flag failed "no folder '$1' was made"; }
class_injection() {
  local replay=(kvc-cluster replay -m "$M" -p 'Once upon a time there was a girl' -n 4)
  local profile=(kvc-profile -m "$M" -f "$T" -c 64 --windows 1)
  local dir
  run_case 3 ok "replay --out-dir with a quote and touch" "${replay[@]}" -s adaptive --out-dir "x'; touch PWNED; echo '"
  check_pwned; expect_dir "x'; touch PWNED; echo '"
  run_case 3 ok "replay label injection --plot into bob's run" "${replay[@]}" -s 'adaptive:label=a"; system("touch P2"); b="' \
    -s "static:label=it's" --plot --out-dir "bob's run"
  check_pwned; expect_dir "bob's run"
  command -v gnuplot >/dev/null && [[ ! -f "$D/bob's run/recall.png" ]] && flag failed "gnuplot is installed but recall.png was not drawn"
  run_case 3 ok "profile --out-dir with a quote and touch" "${profile[@]}" --out-dir "p'; touch PWNED3; echo '"
  check_pwned; expect_dir "p'; touch PWNED3; echo '"
  run_case 3 ok "profile --out-dir bob's run" "${profile[@]}" --out-dir "bob's run"
  check_pwned; expect_dir "bob's run"
  for dir in '$(touch PWNED4)' '`touch PWNED5`' 'a"; system("touch P6"); "' "back\\slash\" ; touch PWNED7 #"; do
    run_case 3 ok "replay --plot --out-dir $dir" "${replay[@]}" -s adaptive --plot --out-dir "$dir"
    check_pwned; expect_dir "$dir"
  done
  run_case 3 ok "profile --out-dir with \$() and a gnuplot string" "${profile[@]}" --out-dir '$(touch PWNED8)"; system("touch P9"); "'
  check_pwned
  # A newline in a name: gnuplot runs a line that starts with '!' in a shell.
  run_case 3 any "replay --plot label with a newline and !touch" "${replay[@]}" -s $'adaptive:label=a\n!touch P10\n' --plot --out-dir out
  check_pwned; [[ $RC != 0 ]] && ! tidy_error 0 && flag untidy "refused, but not in one line: $(first_err)"
  # Taken, the label must not break the CSV it is written into (every row as many fields as the header).
  if [[ -f "$D/out/steps.csv" ]] && awk -F, 'NR == 1 { n = NF } NF != n { bad = 1 } END { exit !bad }' "$D/out/steps.csv"; then
    flag garbage "the label's newline is written raw into steps.csv, splitting every row (exit $RC: $(first_err))"
  fi
  run_case 3 any "replay --plot --out-dir with a newline and !touch" "${replay[@]}" -s adaptive --plot --out-dir $'nl\n!touch PWNED11\n'
  check_pwned; [[ $RC != 0 ]] && ! tidy_error 0 && flag untidy "refused, but not in one line: $(first_err)"
  run_case 3 any "profile --out-dir with a newline and !touch" "${profile[@]}" --out-dir $'pnl\n!touch PWNED12\n'
  check_pwned; [[ $RC != 0 ]] && ! tidy_error 0 && flag untidy "refused, but not in one line: $(first_err)"
  run_case 3 ok "eval needle --out-dir with a quote and touch" kvc-eval needle -m "$M" --haystack "$T" --lengths 128 \
    --depths 0.5 --samples 1 -t 1 --out-dir "n'; touch PWNED13; echo '"
  check_pwned
}

# ---- 4. damaged files ----------------------------------------------------------------------------
declare -A MUT  # kind,field -> count
MUT_KINDS=()
# mutation_case KIND FORMAT SOURCE TARGET I COMMAND...: a damaged copy of SOURCE at TARGET (relative to
# the case folder; m/... copies the whole model first), then COMMAND. COPY_IN="FILE NAME" puts an
# undamaged companion file beside it (a store's index, an index's store).
mutation_case() {
  local kind=$1 fmt=$2 src=$3 rel=$4 i=$5; shift 5
  new_case
  [[ $rel == m/* ]] && cp -r "$M" "$D/m"
  [[ -n "${COPY_IN:-}" ]] && cp "${COPY_IN% *}" "$D/${COPY_IN##* }"
  if [[ $i == 0 ]]; then  # the control: the same command on an intact copy must work
    cp "$src" "$D/$rel"
    [[ $fmt == checkpoint ]] && local MAY_CHANGE=$D/$rel  # resumed, it goes on writing its checkpoint
    run_case 4 ok "$kind: an intact copy (control)" "$@"
    return
  fi
  local verdict promise why where
  verdict=$(python3 "$PY" mutate "$fmt" "$src" "$D/$rel" "$((SEED * 1000003 + i * 101 + ${#MUT_KINDS[@]}))")
  IFS=$'\t' read -r promise why where <<<"$verdict"
  run_case 4 any "$kind #$i ($where)" "$@"
  MUT[$kind,tried]=$(( ${MUT[$kind,tried]:-0} + 1 ))
  if (( RC >= 124 )); then
    MUT[$kind,crash]=$(( ${MUT[$kind,crash]:-0} + 1 ))
  elif [[ $RC != 0 ]]; then
    MUT[$kind,rejected]=$(( ${MUT[$kind,rejected]:-0} + 1 ))
    tidy_error 0 || flag untidy "refused ($where: $why), but not as a one-line error: $(first_err)"
  elif [[ $promise == must ]]; then
    MUT[$kind,garbage]=$(( ${MUT[$kind,garbage]:-0} + 1 ))
    flag garbage "exit 0 on a damaged file the format promises to detect ($where: $why)"
  else
    MUT[$kind,accepted]=$(( ${MUT[$kind,accepted]:-0} + 1 ))
    MUT[$kind,why]+="${MUT[$kind,why]:+,}$why"
  fi
}
class_mutations() {
  local i k accepted=0
  local gen=(kvc-generate -p Once -n 4 -t 1)
  local resume=(kvc-train -m "$M" --bases "$ART/bases.safetensors" -f "$T" "${TRAIN_FLAGS[@]}")
  for ((i = 0; i <= MUTATIONS; i++)); do
    MUT_KINDS=()
    MUT_KINDS+=("model.safetensors|kvc-generate")
    mutation_case model.safetensors safetensors "$M/model.safetensors" m/model.safetensors "$i" "${gen[@]}" -m @D@/m
    MUT_KINDS+=("config.json|kvc-generate")
    mutation_case config.json json "$M/config.json" m/config.json "$i" "${gen[@]}" -m @D@/m
    MUT_KINDS+=("tokenizer.model|kvc-generate")
    mutation_case tokenizer.model tokenizer "$M/tokenizer.model" m/tokenizer.model "$i" "${gen[@]}" -m @D@/m
    MUT_KINDS+=("checkpoint|kvc-train --resume")
    mutation_case checkpoint checkpoint "$ART/g.ckpt" g.ckpt "$i" "${resume[@]}" --checkpoint @D@/g.ckpt --resume -o @D@/gates.safetensors
    MUT_KINDS+=("bases|kvc-generate --lowrank --rank 8")
    mutation_case bases safetensors "$ART/bases.safetensors" bases.safetensors "$i" "${gen[@]}" -m "$M" --lowrank @D@/bases.safetensors --rank 8
    MUT_KINDS+=("gates|kvc-generate --lowrank")
    mutation_case gates safetensors "$ART/gates.safetensors" gates.safetensors "$i" "${gen[@]}" -m "$M" --lowrank @D@/gates.safetensors
    # The index names its store relative to its own folder: each damaged file gets an intact partner.
    MUT_KINDS+=("cluster store|kvc-cluster verify")
    COPY_IN="$ART/s.safetensors s.safetensors" mutation_case "cluster store" store "$ART/s.kvs" s.kvs "$i" kvc-cluster verify --index @D@/s.safetensors
    MUT_KINDS+=("cluster index|kvc-cluster verify")
    COPY_IN="$ART/s.kvs s.kvs" mutation_case "cluster index" safetensors "$ART/s.safetensors" s.safetensors "$i" kvc-cluster verify --index @D@/s.safetensors
  done
  for k in "${MUT_KINDS[@]}"; do accepted=$((accepted + ${MUT[${k%%|*},accepted]:-0})); done
  note 4 "$accepted of them loaded legitimately (damage the format cannot see; by file below)"
}

# ---- 5. kill -9 during writes --------------------------------------------------------------------
declare -A KILL
KILL_TOOLS=()
# state_of NAME: the target after a run of NAME: absent | old (bytes unchanged and it loads) | whole (new
# bytes that load) | broken
state_of() {
  local name=$1 target=${KILL_TARGET[$1]} old=${KILL_OLD[$1]} ok
  [[ -e "$target" ]] || { echo absent; return; }
  case $name in
    calibrate) kvc-generate -m "$M" -p Once -n 2 -t 1 --lowrank "$target" --rank 8 >/dev/null 2>&1 ;;
    train) kvc-generate -m "$M" -p Once -n 2 -t 1 --lowrank "$target" >/dev/null 2>&1 ;;
    cluster) kvc-cluster verify --index "$target" >/dev/null 2>&1 ;;
  esac
  ok=$?
  if [[ $ok != 0 ]]; then echo broken
  elif [[ $(sha256sum <"$target" | cut -d' ' -f1) == "$old" ]]; then echo old
  else echo whole
  fi
}
declare -A KILL_TARGET KILL_OLD
kill_trials() {  # NAME TARGET COMMAND...: KILLS runs killed with SIGKILL, each followed by a whole run
  local name=$1 target=$2; shift 2
  local k=$W/kill/$name saved=$W/kill/saved-$name trial mode delay res killed saw rc state full_s t0 next label
  KILL_TOOLS+=("$name")
  KILL_TARGET[$name]=$target
  KILL_OLD[$name]=$(sha256sum <"$target" | cut -d' ' -f1)
  cp -a "$k" "$saved"
  t0=$EPOCHREALTIME
  WATCH_TMP=$k run_case 5 ok "$name: a whole run, timed" "$@"
  full_s=$(python3 -c "print(max(0.5, $EPOCHREALTIME - $t0))")
  for ((trial = 1; trial <= KILLS; trial++)); do
    rm -rf "$k" && cp -a "$saved" "$k"  # the old files again
    if (( trial % 2 )); then
      mode=delay; delay=$(python3 "$PY" uniform "$SEED-$name-$trial" 0.2 "$full_s")
    else
      mode=ontmp; delay=$(python3 "$PY" uniform "$SEED-$name-$trial" 0 0.0015)
    fi
    new_case; D_USED=1
    CASE_CLASS=5 CASE_LABEL="$name: kill -9 #$trial" CASE_FLAGS="" ERRF=$D/err
    CASE_CMD="cd $(show_cmd "$k") && $(show_cmd "$@")   # SIGKILL $delay s after $([[ $mode == delay ]] && echo 'the start' || echo 'a .*.tmp.* file appears')"
    COUNT[5,tried]=$(( ${COUNT[5,tried]:-0} + 1 ))
    res=$(cd "$k" && python3 "$PY" kill "$mode" "$delay" "$k" "$D/out" "$D/err" "$@")
    read -r killed saw rc < <(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(int(j["killed"]), int(j["saw_tmp"]), j["rc"])' "$res")
    KILL[$name,tried]=$(( ${KILL[$name,tried]:-0} + 1 ))
    [[ $killed == 1 && $saw == 1 ]] && KILL[$name,midwrite]=$(( ${KILL[$name,midwrite]:-0} + 1 ))
    if [[ $killed == 0 ]]; then
      KILL[$name,finished]=$(( ${KILL[$name,finished]:-0} + 1 ))
      if (( rc < 0 )); then flag crash "died of signal $((-rc)) before the kill: $(first_err)"
      elif [[ $rc != 0 ]]; then flag failed "finished before the kill with exit $rc: $(first_err)"; fi
    fi
    state=$(state_of "$name")
    KILL[$name,$state]=$(( ${KILL[$name,$state]:-0} + 1 ))
    [[ $state == absent || $state == broken ]] &&
      flag garbage "after the kill $(basename "$target") is $state (neither the old file nor a whole new one)"
    KILL[$name,stale]=$(( ${KILL[$name,stale]:-0} + $(tmp_files "$k" | grep -c .) ))
    # The next run: it works (resuming a checkpoint the killed run left) and leaves no temporary file.
    next=("$@") label="$name: the run after kill -9 #$trial"
    if [[ $name == train && -f "$k/g.ckpt" ]]; then next+=(--resume); label+=" (--resume)"; fi
    WATCH_TMP=$k run_case 5 ok "$label" "${next[@]}"
    [[ -n $(tmp_files "$k") ]] && KILL[$name,left]=$(( ${KILL[$name,left]:-0} + 1 ))
    state=$(state_of "$name")
    [[ $state != whole && $state != old ]] && flag garbage "after the next run $(basename "$target") is $state"
  done
  rm -rf "$k" && cp -a "$saved" "$k"
}
class_kill() {
  local k=$W/kill
  mkdir -p "$k/calibrate" "$k/train" "$k/cluster"
  # Each target already holds an older file: it must stay whole, or be replaced by a whole new one.
  cp "$ART/bases_old.safetensors" "$k/calibrate/bases.safetensors"
  cp "$ART/gates.safetensors" "$k/train/gates.safetensors"
  cp "$ART/s.kvs" "$k/cluster/s.kvs"; cp "$ART/s.safetensors" "$k/cluster/s.safetensors"
  kill_trials calibrate "$k/calibrate/bases.safetensors" \
    kvc-calibrate -m "$M" -f "$T" --tokens 4000 -c 128 -t 1 -o "$k/calibrate/bases.safetensors"
  kill_trials train "$k/train/gates.safetensors" \
    kvc-train -m "$M" --bases "$ART/bases.safetensors" -f "$T" --alpha 2 --steps 8 --warmup 1 -c 32 --batch 1 \
    --eval-every 0 -t 1 --checkpoint "$k/train/g.ckpt" --checkpoint-every 1 -o "$k/train/gates.safetensors"
  kill_trials cluster "$k/cluster/s.safetensors" \
    kvc-cluster build -m "$M" -f "$T" --prompt-tokens 400 --store "$k/cluster/s.kvs" --index "$k/cluster/s.safetensors"
  note 5 "the targets held an older file; after each kill the next run (kvc-train: --resume when a checkpoint exists) must work"
}

# ---- 6. a full disk ------------------------------------------------------------------------------
fill_disk() {  # FREE_KIB: leave this much of the 1 MiB tmpfs free
  rm -f "$FULL/filler"
  dd if=/dev/zero of="$FULL/filler" bs=4096 2>/dev/null
  (( $1 > 0 )) && truncate -s "-$1K" "$FULL/filler"
  sync
}
FULL_EXPECT=fail FULL_TAG="" FULL_OLD=""
# full_case LABEL COMMAND...: an error in one line, nothing new left on the disk, the old file intact;
# where the output fits (FULL_EXPECT=any), exit 0 with every safetensors written whole.
full_case() {
  local label=$1 f; shift
  WATCH=$FULL run_case 6 "$FULL_EXPECT" "$FULL_TAG: $label" "$@"
  if [[ $FULL_EXPECT == any && $RC != 0 && $RC -lt 124 ]] && ! tidy_error 0; then
    flag untidy "exit $RC but not a one-line error: $(first_err)"
  fi
  if [[ $(sha256sum <"$FULL/old.safetensors") != "$FULL_OLD" ]]; then
    flag garbage "the existing file on the full disk changed"
    cp "$ART/bases_old.safetensors" "$FULL/old.safetensors"
  fi
  if [[ $RC == 0 ]]; then
    while IFS= read -r f; do
      python3 "$PY" whole "$f" || flag garbage "exit 0 but $(basename "$f") is not whole"
    done < <(find "$FULL" -name '*.safetensors' ! -name old.safetensors ! -name pair.safetensors)
  fi
  find "$FULL" -mindepth 1 -maxdepth 1 ! -name filler ! -name old.safetensors ! -name pair.safetensors -exec rm -rf {} +
}
full_disk_round() {  # FREE_KIB EXPECT
  FULL_EXPECT=$2 FULL_TAG="$1 KiB free"
  fill_disk "$1"
  FULL_OLD=$(sha256sum <"$FULL/old.safetensors")
  local cal=(kvc-calibrate -m "$M" -f "$T" --tokens 2000 -c 128 -t 1)
  local train=(kvc-train -m "$M" --bases "$ART/bases.safetensors" -f "$T" --steps 2 -c 32 --eval-every 0 -t 1)
  full_case "calibrate -o" "${cal[@]}" -o "$FULL/bases.safetensors"
  full_case "calibrate -o over an existing file" "${cal[@]}" -o "$FULL/old.safetensors"
  full_case "train -o" "${train[@]}" -o "$FULL/gates.safetensors"
  full_case "train --checkpoint" "${train[@]}" --checkpoint "$FULL/g.ckpt" --checkpoint-every 1 -o @D@/gates.safetensors
  full_case "generate --json-out" kvc-generate -m "$M" -p Once -n 4 -t 1 --json-out "$FULL/s.json"
  full_case "cluster build --store --index" kvc-cluster build -m "$M" -p "$PROMPT" --store "$FULL/s.kvs" --index "$FULL/s.safetensors"
  full_case "cluster build --index" kvc-cluster build -m "$M" -p "$PROMPT" --store @D@/s.kvs --index "$FULL/s.safetensors"
  full_case "generate --retrieval-store" kvc-generate -m "$M" -p "$PROMPT" -n 8 -t 1 --retrieval adaptive --retrieval-store "$FULL/r.kvs"
  full_case "profile --out-dir" kvc-profile -m "$M" -f "$T" -c 64 --windows 1 --out-dir "$FULL/p"
  full_case "cluster replay --out-dir" kvc-cluster replay -m "$M" -p "$PROMPT" -n 4 -s adaptive --out-dir "$FULL/r"
  full_case "make-checkpoint -o" kvc-make-checkpoint --hidden 64 --intermediate 128 --layers 2 --heads 4 --kv-heads 2 \
    --head-dim 16 --vocab 512 -o "$FULL/ck"
  STDOUT_TO=$FULL/ppl.json full_case "eval ppl --json > file" kvc-eval ppl -m "$M" -f "$T" -c 64 --max-windows 1 -t 1 --json
  STDOUT_TO=$FULL/ids.txt full_case "tokenize > file" kvc-tokenize -m "$M" -f "$T"
  STDOUT_TO=$FULL/bases.safetensors full_case "calibrate -o - > file" "${cal[@]}" -o -
  # Rebuilding a committed pair whose index is on the full disk (its store is not): the run fails, and
  # the previous pair must still verify.
  full_case "cluster rebuild, index on the full disk" kvc-cluster build -m "$M" -p "$PROMPT They played." \
    --store "$W/pair/s.kvs" --index "$FULL/pair.safetensors"
  if [[ $RC != 0 ]] && ! kvc-cluster verify --index "$FULL/pair.safetensors" >"$W/log/pair.out" 2>&1; then
    flag garbage "the failed rebuild replaced the committed store: the previous index no longer verifies ($(tail -n1 "$W/log/pair.out" | cut -c1-200))"
  fi
  cp "$W/pair-saved.kvs" "$W/pair/s.kvs"
}
class_full_disk() {
  mkdir -p "$FULL"
  if ! mount -t tmpfs -o size=1M tmpfs "$FULL" 2>"$W/log/mount.err"; then
    NOTE[6]="skipped: cannot mount a tmpfs here ($(head -n1 "$W/log/mount.err" | cut -c1-100))"
    SKIPPED6=1
    return
  fi
  cp "$ART/bases_old.safetensors" "$FULL/old.safetensors"
  mkdir -p "$W/pair"
  kvc-cluster build -m "$M" -p "$PROMPT" --store "$W/pair/s.kvs" --index "$FULL/pair.safetensors" >/dev/null 2>&1
  cp "$W/pair/s.kvs" "$W/pair-saved.kvs"
  full_disk_round 0 fail
  full_disk_round 12 any
  umount "$FULL"
  note 6 "each command at 0 KiB free (an error due) and at 12 KiB free (small outputs fit: exit 0 must leave whole files)"
}

# ---- 7. abusive command lines --------------------------------------------------------------------
class_flags() {
  local gen=(kvc-generate -p 'Once upon a time' -t 1)
  # Each a value that is wrong as given (-c 0 and --temp inf are not: llama.cpp reads them as "the
  # model's context" and "uniform sampling"; --dtype float64 is a supported, if unlisted, type).
  local bad=(
    "--press snapkv --ratio nan" "--press snapkv --ratio -0.5" "--press snapkv --ratio 1e308" "--press snapkv --ratio ''"
    "--press snapkv --ratio 0.5x" "--press snapkv --ratio ０.５" "--press h2o --budget 0" "--press h2o --budget -3"
    "--press h2o --budget 99999999999999999999" "-n 99999999999999999999" "-n -5" "-n abc" "-n ''" "-c -1"
    "-c 99999999999999999999" "--temp nan" "--temp -inf" "--top-p 1.5" "--top-p nan" "--top-k abc" "--min-p -0.1"
    "--min-p 2" "--repeat-penalty nan" "--repeat-penalty -1" "--repeat-last-n -2" "-t 0" "-t -1" "-t 100000"
    "-s abc" "-s 1.5" "--dtype float8" "--device tpu" "-ctk q5" "-ctk ''" "--json-out ''" "-m ''"
    "--press \$'snap\\x01kv' --ratio 0.5" "--press \$'snapkv\\nx' --ratio 0.5" "--press snapkv:window=2,window=3 --ratio 0.5"
    "--press h2o: --ratio 0.5" "--ratio 0.5" "--retrieval adaptive:topk=-1" "--retrieval adaptive:budget=nan"
    "--retrieval adaptive:csize=0" "--retrieval adaptive:cache_kb=1e99" "--lowrank /nonexistent" "--lowrank ''"
    "--rank 8" "--prompt-tokens -1" "-f /nonexistent" "-ngl 99" "-fa" "-cnv" "--n-gpu-layers 99" "-b 512" "--mlock"
    "-hf org/repo" "--flash-attn" "-m \$'\\x1b[31mred'"
  )
  local b args
  for b in "${bad[@]}"; do
    eval "args=($b)"
    [[ " $b " == *" -n "* ]] || args+=(-n 2)
    [[ " $b " == *" -m "* ]] || args=(-m "$M" "${args[@]}")
    STRICT=1 run_case 7 fail "generate $b" "${gen[@]}" "${args[@]}"
  done
  # A budget beyond the context keeps everything, or is refused by name; it must not be allocated.
  run_case 7 any "generate --press h2o --budget 100000000" "${gen[@]}" -m "$M" -n 2 --press h2o --budget 100000000
  if [[ $RC != 0 ]]; then
    if grep -q 'allocate' "$ERRF"; then flag failed "a 5-token prompt with a budget of 10^8 entries tries to allocate the budget: $(first_err)"
    elif ! tidy_error 1; then flag untidy "exit $RC but not a one-line error: $(first_err)"; fi
  fi
  local others=(
    "kvc-calibrate -m $M -f $T --tokens 0 -o @D@/b.safetensors" "kvc-calibrate -m $M -f $T --tokens -1 -o @D@/b.safetensors"
    "kvc-calibrate -m $M -f $T -c 0 -o @D@/b.safetensors" "kvc-calibrate -m $M -f $T -o ''"
    "kvc-train -m $M -f $T --bases $ART/bases.safetensors --lr nan -o @D@/g.safetensors"
    "kvc-train -m $M -f $T --bases $ART/bases.safetensors --alpha nan -o @D@/g.safetensors"
    "kvc-train -m $M -f $T --bases $ART/bases.safetensors --heldout 1.5 -o @D@/g.safetensors"
    "kvc-train -m $M -f $T --bases $ART/bases.safetensors --loss foo -o @D@/g.safetensors"
    "kvc-train -m $M -f $T --bases $ART/bases.safetensors --resume -o @D@/g.safetensors"
    "kvc-train -m $M -f $T --bases $ART/bases.safetensors --checkpoint-every -1 --checkpoint @D@/c -o @D@/g.safetensors"
    "kvc-cluster" "kvc-cluster frobnicate" "kvc-cluster replay -m $M -p hi -n -1 -s adaptive"
    "kvc-cluster replay -m $M -p hi -n 2 -s static:topk=0" "kvc-cluster replay -m $M -p hi -n 2 -s adaptive:iters=-1"
    "kvc-cluster verify --index ''"
    "kvc-profile -m $M -f $T --windows 0 --out-dir @D@/p" "kvc-profile -m $M -f $T --ratios 2 --out-dir @D@/p"
    "kvc-profile -m $M -f $T --ratios nan --out-dir @D@/p" "kvc-profile -m $M -f $T --task-window -1 --out-dir @D@/p"
    "kvc-eval" "kvc-eval frobnicate" "kvc-eval ppl -m $M -f $T -c 1" "kvc-eval ppl -m $M -f $T --max-windows -1"
    "kvc-eval ppl -m $M -f $T -ngl 99" "kvc-bench -m $M --contexts -1" "kvc-bench -m $M --contexts abc"
    "kvc-bench -m $M --json bench.json" "kvc-tokenize -m /nonexistent -p hi" "kvc-tokenize -m $M -p hi -fa"
    "kvc-make-checkpoint --hidden -1 -o @D@/ck" "kvc-make-checkpoint --heads 3 --kv-heads 2 -o @D@/ck"
  )
  for b in "${others[@]}"; do
    eval "args=($b)"
    STRICT=1 run_case 7 fail "${b//$W/\$W}" "${args[@]}"
  done
}

# ---- the table -----------------------------------------------------------------------------------
table() {
  local c cat row
  echo "| class | inputs tried | crashes | hangs | garbage | leftovers | untidy errors | failed (should work) | notes |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
  for c in 1 2 3 4 5 6 7; do
    row="| $c. ${CLASS_NAME[$c]}"
    if [[ $c == 6 && ${SKIPPED6:-0} == 1 ]]; then
      echo "$row | 0 | – | – | – | – | – | – | ${NOTE[6]} |"; continue
    fi
    for cat in "${CATEGORIES[@]}"; do row+=" | ${COUNT[$c,$cat]:-0}"; done
    echo "$row | ${NOTE[$c]:-} |"
  done
  echo
  echo "Class 4, by file (each damaged copy is run through the tool that reads it; \"accepted\" is exit 0 on damage"
  echo "the format cannot see, \"garbage\" exit 0 on damage it promises to detect):"
  echo
  echo "| file | read by | damaged copies | refused | accepted (why) | garbage | crashes or hangs |"
  echo "|---|---|---:|---:|---|---:|---:|"
  local k kind why
  for k in "${MUT_KINDS[@]}"; do
    kind=${k%%|*}
    why=$(echo "${MUT[$kind,why]:-}" | tr ',' '\n' | sed 's/^ //' | grep -v '^$' | sort | uniq -c | awk '{n=$1; $1=""; printf "%s%s ×%d", (NR>1?", ":""), substr($0,2), n}')
    echo "| $kind | \`${k#*|}\` | ${MUT[$kind,tried]:-0} | ${MUT[$kind,rejected]:-0} | ${MUT[$kind,accepted]:-0}${why:+ ($why)} | ${MUT[$kind,garbage]:-0} | ${MUT[$kind,crash]:-0} |"
  done
  echo
  echo "Class 5, by writer (half the kills at a random delay, half just after a temporary file appears):"
  echo
  echo "| writer | kill -9 runs | killed after a temp file appeared | target old after the kill | target new and whole | target gone or broken | temp files left by the kills | temp files left after the next run |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  local n
  for n in "${KILL_TOOLS[@]}"; do
    echo "| $n | ${KILL[$n,tried]:-0} | ${KILL[$n,midwrite]:-0} | ${KILL[$n,old]:-0} | ${KILL[$n,whole]:-0} | $(( ${KILL[$n,absent]:-0} + ${KILL[$n,broken]:-0} )) | ${KILL[$n,stale]:-0} | ${KILL[$n,left]:-0} |"
  done
}

main() {
  setup
  echo "== 1. output = input" >&2; class_output_is_input
  echo "== 2. device outputs" >&2; class_devices
  echo "== 3. injection" >&2; class_injection
  echo "== 4. damaged files (${MUTATIONS} per kind)" >&2; class_mutations
  echo "== 5. kill -9 (${KILLS} per writer)" >&2; class_kill
  echo "== 6. full disk" >&2; class_full_disk
  echo "== 7. abusive command lines" >&2; class_flags
  local elapsed=$((SECONDS - START)) out
  out=$W/faults.md
  {
    echo "# Fault injection"
    echo
    echo "$(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;"
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'); \`KVC_FAULT_SEED=$SEED KVC_FAULT_MUTATIONS=$MUTATIONS KVC_FAULT_KILLS=$KILLS scripts/fault_injection.sh\`;"
    echo "$((elapsed / 60)) min $((elapsed % 60)) s; model \`stories260K\` (a private copy); timeout ${TIMEOUT} s."
    echo
    echo "Crashes: a signal exit or status ≥ 128 other than 130, or a crash report on stderr. Hangs: no exit within"
    echo "the timeout. Garbage: exit 0 where an error was due, an input file changed (sha256 before and after every"
    echo "run), a device replaced, a name run as a command. Leftovers: a \`.*.tmp.*\` file after any run, or a new"
    echo "file in the output folder after a failure (not the empty \`.NAME.lock\` files of flock locks, which stay by"
    echo "design). Untidy: an error that is not one line \`tool: error: ...\` (class 7: exactly one line on stderr and"
    echo "exit 1 or 2). Failed: exit non-zero where the run should work. Every run is limited to $((VMEM_KB / 1048576)) GiB of address space."
    echo
    table
    echo
    if [[ -s "$FINDINGS" ]]; then
      echo "## Findings"
      echo
      echo "\`\$W\` is the script's work folder (\`KVC_FAULT_KEEP=1\` keeps it)."
      echo
      cat "$FINDINGS"
    else
      echo "No findings."
    fi
  } >"$out"
  cat "$out"
  if [[ "$TABLE" != - ]]; then
    mkdir -p "$(dirname "$TABLE")"
    cp "$out" "$TABLE.tmp.$$" && mv "$TABLE.tmp.$$" "$TABLE"
    echo "written: $TABLE" >&2
  fi
}

main
