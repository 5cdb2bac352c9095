"""Score a checkpoint on the Multi30k validation set with beam 4 on the GPU; print one JSON line.

python experiments/gpu/score_multi30k.py NAME CHECKPOINT_OR_RUN_DIR MULTI30K_DIR
"""

import gzip
import json
import sys

from transformer.config import DecodeConfig
from transformer.evaluation.bleu import score_translations
from transformer.translator import Translator


def main() -> None:
    """Translate the validation sources and print the cased and lowercased BLEU as JSON.

    Returns
    -------
    None

    Notes
    -----
    Arguments are read from ``sys.argv`` where the module docstring says so.
    """
    name, checkpoint, data = sys.argv[1:4]
    with gzip.open(f"{data}/val.en.gz", "rt", encoding="utf-8") as handle:
        sources = handle.read().splitlines()
    with gzip.open(f"{data}/val.de.gz", "rt", encoding="utf-8") as handle:
        references = handle.read().splitlines()
    hypotheses = Translator.from_checkpoint(checkpoint, DecodeConfig(), "cuda").translate(sources)
    cased = score_translations(hypotheses, references)
    lowercased = score_translations(hypotheses, references, lowercase=True)
    record = {"run": name, "checkpoint": checkpoint, "bleu": round(cased.bleu, 2)}
    record["bleu_lc"] = round(lowercased.bleu, 2)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
