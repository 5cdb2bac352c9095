#!/usr/bin/env bash
# The shipped Multi30k config on one GPU, four runs at a time (the seed records in this folder):
#   bash experiments/gpu/multi30k_seeds.sh /path/to/multi30k   (a folder with train.* and val.* .gz files)
# Each run: train (configs/multi30k.yaml, no time limit, train.device=cuda), average the last 3 checkpoints,
# score the average and the last checkpoint on the validation set with beam 4 (score_multi30k.py).
set -euo pipefail
data=$(realpath "$1")
work=${WORK_DIR:-/tmp/multi30k-seeds}
here=$(dirname "$(realpath "$0")")
mkdir -p "$work"
run() {
    local name=$1
    shift
    python3 -m transformer.cli train --config configs/multi30k.yaml --set data.mirror="$data" \
        --set train.device=cuda --set train.max_minutes=null "$@" --output-dir "$work/$name" >"$work/$name.log" 2>&1
    python3 -m transformer.cli average-checkpoints --run "$work/$name" --last 3 --output "$work/$name-avg3" >/dev/null
    python3 "$here/score_multi30k.py" "$name" "$work/$name-avg3" "$data"
    python3 "$here/score_multi30k.py" "$name-last" "$work/$name" "$data"
    tr '\r' '\n' <"$work/$name.log" | grep "^trained" | tail -1
}
run base-seed2 --set train.seed=2 >"$work/a.out" &
run base-seed3 --set train.seed=3 >"$work/b.out" &
run attn01-seed1 --set model.attention_dropout=0.1 >"$work/c.out" &
run attn01-seed2 --set model.attention_dropout=0.1 --set train.seed=2 >"$work/d.out" &
wait
cat "$work"/*.out
