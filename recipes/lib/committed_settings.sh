# Sourced by the recipes whose committed results (data/results/eviction/, data/results/leaderboard/) ran
# DynamicKV and KVCompose with the parameters below, which differ from the presses' defaults
# (docs/eviction.md#defaults-and-their-sources). The rows keep the bare names; the presses run:
#   press_spec NAME        the spec NAME's committed rows were made with (NAME itself for every other press)
#   COMMITTED_METHOD_SPECS kvc-eval sweep's --method-spec flags for the same
COMMITTED_DYNAMICKV="dynamickv:window=32,kernel=5,pad=edge,pool=all,m=2,rmax=2"
COMMITTED_KVCOMPOSE="kvcompose:task=window,kernel=5"
COMMITTED_KVCOMPOSE_UNSTRUCTURED="kvcompose_unstructured:task=window,kernel=5"
press_spec() {
  case "$1" in
    dynamickv) echo "$COMMITTED_DYNAMICKV" ;;
    kvcompose) echo "$COMMITTED_KVCOMPOSE" ;;
    kvcompose_unstructured) echo "$COMMITTED_KVCOMPOSE_UNSTRUCTURED" ;;
    *) echo "$1" ;;
  esac
}
COMMITTED_METHOD_SPECS=(--method-spec "dynamickv=$COMMITTED_DYNAMICKV" --method-spec "kvcompose=$COMMITTED_KVCOMPOSE"
                        --method-spec "kvcompose_unstructured=$COMMITTED_KVCOMPOSE_UNSTRUCTURED")
