#!/usr/bin/env bash
# Behaviour check for a refactoring (issue #30): the working tree against an earlier commit.
#   - 150 training steps of the quick-start model (4,000 synthetic pairs, fp32, 1 thread, explicit attention:
#     "auto" attention times both kernels at start-up and may pick another by load) must give bit-identical
#     weights and optimizer state;
#   - the old tree's model, translated by both trees (greedy, beam 4, int8, n-best with scores), must give
#     byte-identical output (which also shows that a checkpoint from before loads).
# Usage: scripts/behaviour_check.sh OLD_REV [WORK_DIR]   (from the repository root, with the venv active; ~3 min)
set -euo pipefail
old_rev=$1
work=${2:-$(mktemp -d)}
repo=$(git rev-parse --show-toplevel)
rm -rf "$work"; mkdir -p "$work"
git -C "$repo" worktree add -q --detach "$work/old" "$old_rev"
export OMP_NUM_THREADS=1 TRANSFORMER_ALLOCATOR=system
common=(--config configs/quickstart.yaml --set train.max_steps=150 --set train.max_minutes=null
        --set train.checkpoint_every=150 --set train.validate_every=150 --set train.threads=1
        --set data.synthetic_train_pairs=4000 --set train.precision=fp32 --set ladder.choose=none
        --set model.attention_implementation=explicit)
PYTHONPATH="$work/old/src" python -c "import transformer; print('old tree imported from', transformer.__file__)"
for tree in old new; do
    src=$([ $tree = old ] && echo "$work/old" || echo "$repo")
    (cd "$src" && PYTHONPATH="$src/src" python -m transformer.cli train "${common[@]}" --output-dir "$work/run-$tree" > "$work/train-$tree.log" 2>&1)
done
python - "$work" <<'PY'
import sys, pathlib
from safetensors.torch import load_file
work = pathlib.Path(sys.argv[1])
old = sorted((work / "run-old" / "checkpoints").glob("step-*"))[-1]
new = sorted((work / "run-new" / "checkpoints").glob("step-*"))[-1]
print("checkpoints:", old.name, new.name)
for name in sorted(p.name for p in old.glob("*.safetensors")):
    a, b = load_file(old / name), load_file(new / name)
    assert a.keys() == b.keys(), name
    same = all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and bool((a[k] == b[k]).all()) for k in a)
    print(f"  {name}: {len(a)} tensors, bit-identical: {same}")
PY
head -n 300 "$work/run-old/data/test.en" > "$work/sources.en" 2>/dev/null || head -n 300 "$work/run-old/data/valid.en" > "$work/sources.en"
for search in "--beam 1" "--beam 4" "--beam 4 --precision int8" "--beam 4 --nbest 2 --scores"; do
    for tree in old new; do
        src=$([ $tree = old ] && echo "$work/old" || echo "$repo")
        (cd "$src" && PYTHONPATH="$src/src" python -m transformer.cli translate --checkpoint "$work/run-old" $search \
            --input "$work/sources.en" --output "$work/out-$tree-${search// /_}.de" > /dev/null 2>&1)
    done
    if cmp -s "$work/out-old-${search// /_}.de" "$work/out-new-${search// /_}.de"; then r=identical; else r=DIFFERENT; fi
    echo "translate $search (old model, old vs new code): $(wc -l < "$work/out-new-${search// /_}.de") lines, $r" | tee -a "$work/verdict.txt"
done
git -C "$repo" worktree remove --force "$work/old"
python - "$work" <<'PY'
import pathlib, sys
from safetensors.torch import load_file
work = pathlib.Path(sys.argv[1])
ok = all(
    all(bool((a[k] == b[k]).all()) for k in a)
    for name in ("model.safetensors", "optimizer.safetensors")
    for a, b in [(load_file(sorted((work / "run-old/checkpoints").glob("step-*"))[-1] / name),
                  load_file(sorted((work / "run-new/checkpoints").glob("step-*"))[-1] / name))]
)
sys.exit(0 if ok and "DIFFERENT" not in (work / "verdict.txt").read_text() else 1)
PY
