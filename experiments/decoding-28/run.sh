#!/usr/bin/env bash
# Issue #28's experiments on Multi30k EN-DE (validation set): MBR against beam 4, ensembles of two and four
# independently trained models, and tagged back-translation from half of the pairs.
#
#   experiments/decoding-28/run.sh            # everything (7 trainings of 2,800 steps, about 30 min each on a quiet 2-core AMX CPU)
#   STEPS="seeds compare" experiments/decoding-28/run.sh    # only some steps
#   SEEDS="1 2" STEPS="seeds compare" experiments/decoding-28/run.sh   # two seeds now, the others later
#   PARALLEL=1 experiments/decoding-28/run.sh   # two trainings at a time, one thread each (logs in $RUNS/NAME.log)
#
# Resumable: a finished training (its .finished marker) is skipped, an interrupted one continues with
# --resume, a back-translated corpus is kept once written, and benchmarks/compare_decoding.py skips the rows
# already in its JSON. Set DATA to the folder of {train,val}.{en,de}.gz and RUNS to where runs go.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${DATA:-/work/shared/data/multi30k}
RUNS=${RUNS:-runs/decoding-28}
OUT=experiments/decoding-28
STEPS=${STEPS:-"seeds compare halves backtranslate bt-compare"}
SEEDS=${SEEDS:-"1 2 3 4"}
for step in $STEPS; do  # a misspelt step would otherwise do nothing, silently
    case $step in
        seeds | compare | halves | backtranslate | bt-compare) ;;
        *) echo "run.sh: STEPS: unknown step '$step' (known: seeds compare halves backtranslate bt-compare)" >&2; exit 2 ;;
    esac
done
mkdir -p "$RUNS"
wants() {  # wants STEP: STEP is one of the words in $STEPS (a substring test would run "compare" for "bt-compare")
    [[ " $STEPS " == *" $1 "* ]]
}

train() {  # train NAME [train options...]: new, resumed, or skipped when finished
    local name=$1
    shift
    if [ -f "$RUNS/$name/.finished" ]; then
        return
    fi
    # The whole recipe (2,800 steps of the 4x256-4k rung) whatever the machine's speed or load: no time budget
    # and no ladder, so the models compared differ in their seed or data only.
    local fixed=(--set train.max_minutes=null --set ladder.choose=none)
    if [ -f "$RUNS/$name/checkpoints/index.json" ]; then
        transformer train --config configs/multi30k.yaml --output-dir "$RUNS/$name" --resume "${fixed[@]}" "$@"
    else
        transformer train --config configs/multi30k.yaml --output-dir "$RUNS/$name" "${fixed[@]}" "$@"
    fi
    touch "$RUNS/$name/.finished"
}

# PARALLEL=1 trains two models at once, one thread each: on a 2-core AMD EPYC (AVX-512 BF16) two 1-thread
# trainings made 1.01 steps/s together against 0.89 for one 2-thread training (2026-11-28), and the thread
# count does not change the model (the logged losses of the first 60 steps agreed to the last printed digit).
running=()
start() {  # start NAME [train options...]: trained now, or beside another one with PARALLEL=1
    if [ "${PARALLEL:-0}" = 1 ]; then
        train "$@" --set train.threads=1 > "$RUNS/$1.log" 2>&1 &
        running+=($!)
        if [ ${#running[@]} -ge 2 ]; then finish; fi
    else
        train "$@"
    fi
}
finish() {  # wait for every training started in the background, then stop if one failed
    local failed=0
    for pid in ${running[@]+"${running[@]}"}; do
        wait "$pid" || failed=1  # never leave the other one running behind an early exit
    done
    running=()
    return $failed
}

zcat "$DATA/val.en.gz" > "$RUNS/val.en"
zcat "$DATA/val.de.gz" > "$RUNS/val.de"

if wants seeds; then  # four independently trained models (seed 1 is the shipped recipe)
    for seed in $SEEDS; do
        start "seed$seed" --set data.mirror="$DATA" --set train.seed=$seed
    done
    finish
fi

if wants compare; then  # MBR N in {8, 16, 32} against beam 4; ensembles of 2 and 4 against each alone
    # With the further seeds that have finished (ensembles of as many as there are): rows already in the JSON
    # are kept, so running this after seeds 1-2 and again after seeds 3-4 measures each row once.
    # MBR_SEEDS names the models MBR runs with (each tested against its own beam 4): "1" by default, "1 2" for
    # a second seed pair.
    members=()
    for seed in 2 3 4; do
        if [ -f "$RUNS/seed$seed/.finished" ]; then members+=("$RUNS/seed$seed"); else break; fi
    done
    mbr_models=()
    for seed in ${MBR_SEEDS:-1}; do mbr_models+=("$RUNS/seed$seed"); done
    python -m benchmarks.compare_decoding --checkpoint "${mbr_models[@]}" ${members[@]+--ensemble "${members[@]}"} \
        --source "$RUNS/val.en" --reference "$RUNS/val.de" --mbr 8 16 32 \
        --output "$OUT/comparison.json"
fi

if wants halves; then  # the first half of the pairs in both directions
    half=$(( $(zcat "$DATA/train.en.gz" | wc -l) / 2 ))
    mkdir -p "$RUNS/first-half" "$RUNS/second-half"
    for lang in en de; do  # decompressed first: `zcat | head` would end zcat by SIGPIPE, fatal under pipefail
        zcat "$DATA/train.$lang.gz" > "$RUNS/train.$lang"
        head -n "$half" "$RUNS/train.$lang" > "$RUNS/first-half/train.$lang"
        tail -n "+$((half + 1))" "$RUNS/train.$lang" > "$RUNS/second-half/train.$lang"
        cp "$RUNS/val.$lang" "$RUNS/first-half/val.$lang"
    done
    start half-en-de --data-dir "$RUNS/first-half" --set train.seed=1
    start half-de-en --data-dir "$RUNS/first-half" --set data.source_lang=de --set data.target_lang=en \
        --set train.seed=1
    finish
fi

if wants backtranslate; then  # the second half's German, back-translated; then trained on both
    if [ ! -f "$RUNS/bt-corpus/backtranslation.json" ]; then
        transformer backtranslate --checkpoint "$RUNS/half-de-en" --input "$RUNS/second-half/train.de" \
            --output "$RUNS/bt-corpus" --source-lang en --target-lang de --seed 1
    fi
    train half-plus-bt --data-dir "$RUNS/first-half" --set train.seed=1 \
        --set data.backtranslated_dir="$RUNS/bt-corpus" --set data.backtranslation_tag="<BT>"
fi

if wants bt-compare; then  # half data, half + back-translation, full data (seed 1), each against the one before
    python -m benchmarks.compare_decoding --checkpoint "$RUNS/half-en-de" "$RUNS/half-plus-bt" "$RUNS/seed1" \
        --source "$RUNS/val.en" --reference "$RUNS/val.de" --mbr --against-previous \
        --output "$OUT/backtranslation.json"
fi
