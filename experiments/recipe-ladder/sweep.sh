#!/bin/bash
# One recipe run on the GPU: train N steps with the recipe's shares scaled to N, average the last 3, score.
# usage: sweep.sh NAME STEPS [--set ...]
name=$1; steps=$2; shift 2
cd .sweepdata/clean; export PYTHONPATH=$PWD/src; D=$PWD/..
run=/tmp/sweep/$name
rm -rf $run; mkdir -p /tmp/sweep
warm=$(( steps * ${WARM:-600} / 2800 )); cool=$(( steps * 1000 / 2800 )); every=$(( steps * 250 / 2800 ))
python3 -m transformer.cli train --config configs/multi30k.yaml --set data.mirror=$D \
  --set train.max_steps=$steps --set train.warmup_steps=$warm --set train.cooldown_steps=$cool \
  --set train.validate_every=$every --set train.checkpoint_every=$every --set train.max_minutes=null \
  --set train.precision=fp32 --set train.device=cuda "$@" --output-dir $run > $run.log 2>&1 || { echo "$name train failed"; tail -3 $run.log; exit 1; }
python3 -m transformer.cli average-checkpoints --run $run --last 3 --output $run/avg >> $run.log 2>&1
python3 -m transformer.cli evaluate --checkpoint $run/avg --source $D/val.en --reference $D/val.de --lowercase --device cuda > $run.eval 2>&1
echo "$name steps=$steps $* :: $(grep -i 'BLEU' $run.eval | head -1)"
