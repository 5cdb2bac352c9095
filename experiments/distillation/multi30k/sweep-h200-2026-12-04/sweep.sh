#!/bin/bash
# The distillation sweep on one teacher's pass, at the student config's fixed 3,600 steps, on the GPU;
# then the repository's CUDA tests. Writes $OUT/sweep.tar.gz (records) and $OUT/log.txt.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
START=$(date +%s)
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"
echo "=== gpu tests"
timeout 100 python3 -m pytest -q -m gpu tests/gpu tests/decoding/test_quality_flags.py -p no:cacheprovider 2>&1 | tail -8
T=runs/multi30k/averaged
COMMON="--set data.mirror=runs/device/multi30k --set distill.student_precision=fp32"
run() {  # name, extra --set options
  local name=$1; shift
  local now=$(( $(date +%s) - START ))
  if [ $now -gt ${BUDGET:-470} ]; then echo "SKIP $name at ${now}s"; return; fi
  local reuse=""
  [ "$name" != "e4d1-ff512" ] && reuse="--reuse-teacher-pass runs/device/e4d1-ff512"
  echo "=== $name at ${now}s"
  python3 -c "import sys; from transformer.cli import main; sys.exit(main(sys.argv[1:]))" distill --teacher $T --config multi30k-student $COMMON "$@" \
    --output-dir runs/device/$name $reuse > runs/device/$name.log 2>&1
  echo "rc $? after $(( $(date +%s) - START ))s"; tail -3 runs/device/$name.log
  mkdir -p $OUT/r; cp runs/device/$name/distill.json $OUT/r/$name.json 2>/dev/null; cp runs/device/$name/report.md $OUT/r/$name.md 2>/dev/null
  cp runs/device/$name.log $OUT/r/ 2>/dev/null
  tar -czf $OUT/sweep.tar.gz -C $OUT r
}
run e4d1-ff512
run e4d1-ff1024 --set model.d_ff=1024
run e6d1-ff512 --set model.num_encoder_layers=6
run e4d2-ff512 --set model.num_decoder_layers=2
run e4d1-ff512-mix --set distill.mix_original=true
run e4d1-d384 --set model.d_model=384 --set model.d_ff=768 --set model.num_heads=6
rm -rf $OUT/r
echo "done at $(( $(date +%s) - START ))s"
