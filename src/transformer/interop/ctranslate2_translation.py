"""``transformer translate --engine ctranslate2``: the models and settings CTranslate2 takes, and the translation.

CTranslate2 runs its own search, which this project does not drive: it has only the ``power`` length penalty
(score / |Y|^alpha), one output per sentence and none of our sampling, MBR, constraints, prefixes, scores or
alignments. A setting it would ignore is refused, naming the option, rather than dropped silently.
"""

from collections.abc import Sequence
from pathlib import Path

from transformer.checkpoint.layout import CheckpointError, resolve_checkpoint
from transformer.config.decode import DecodeConfig
from transformer.data.text_lines import read_input_lines, write_output_lines
from transformer.interop.ctranslate2 import CTranslate2Translator

#: The search of ``--engine ctranslate2`` before any flag: the paper's (an export keeps no run config), with the
#: one length penalty CTranslate2 has, ``power``, so that the command works without ``--length-penalty-form``.
CTRANSLATE2_DEFAULT_SEARCH = DecodeConfig(length_penalty_form="power")


def is_pytorch_checkpoint(path: Path) -> bool:
    """Whether a path is one of this project's checkpoints (or a run holding one).

    Parameters
    ----------
    path : Path
        The ``--checkpoint`` of ``translate --engine ctranslate2``.

    Returns
    -------
    bool
        True when :func:`~transformer.checkpoint.resolve_checkpoint` finds a checkpoint there.

    Notes
    -----
    A CTranslate2 export holds ``model.bin``, not ``model.safetensors``, so the two never match each other.
    """
    try:
        resolve_checkpoint(path)
    except CheckpointError:
        return False
    return True


def ctranslate2_model_directory(checkpoints: Sequence[str]) -> Path:
    """Take the one CTranslate2 export a ``--checkpoint`` list names.

    Parameters
    ----------
    checkpoints : sequence of str
        The ``--checkpoint`` values.

    Returns
    -------
    Path
        The export's directory.

    Raises
    ------
    ValueError
        For several checkpoints (CTranslate2 decodes one model), or for one of this project's checkpoints,
        naming the command that exports it.

    Notes
    -----
    Checked before the search settings, so the commonest mistake (passing the run instead of its export)
    gets the message that says how to make the export.
    """
    if len(checkpoints) > 1:
        raise ValueError("--engine ctranslate2 decodes one model: give one --checkpoint (no ensemble)")
    [model_dir] = checkpoints
    if is_pytorch_checkpoint(Path(model_dir)):
        raise ValueError(
            f"--checkpoint {model_dir}: a PyTorch checkpoint, not a CTranslate2 model; export it with "
            f"'transformer convert --to ctranslate2 {model_dir} OUTPUT_DIR' and pass OUTPUT_DIR, or drop "
            "--engine ctranslate2"
        )
    return Path(model_dir)


def pytorch_only_options(settings: DecodeConfig) -> list[str]:
    """List the options of this project's searches that a set of settings uses.

    Parameters
    ----------
    settings : DecodeConfig
        The search settings the options made.

    Returns
    -------
    list of str
        The flags whose settings differ from the defaults, e.g. ``["--sampling", "--min-length"]``.

    Notes
    -----
    ``--engine ctranslate2`` runs CTranslate2's own search, which would ignore these settings, so they are
    refused instead.
    """
    defaults = DecodeConfig()
    used = {
        "--sampling": settings.sampling,
        "--mbr": settings.mbr != defaults.mbr,
        "--no-repeat-ngram": settings.no_repeat_ngram != defaults.no_repeat_ngram,
        "--min-length": settings.min_length != defaults.min_length,
        "--max-length": settings.max_length != defaults.max_length,
    }
    return [flag for flag, given in used.items() if given]


def check_ctranslate2_search(settings: DecodeConfig, precision: str, output_options: Sequence[str]) -> None:
    """Refuse search settings and output options CTranslate2's search cannot follow.

    Parameters
    ----------
    settings : DecodeConfig
        The search settings (the paper's, with the command's flags applied: an export keeps no run config).
    precision : str
        ``--precision``; CTranslate2 takes ``--compute-type`` instead.
    output_options : sequence of str
        The output flags given that only this project's translator produces (``--prefix-file``,
        ``--alignments``, ``--scores``).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the options: a length penalty other than ``power`` (unless alpha is 0), ``--nbest``,
        ``--no-cache`` or ``--precision``, and every setting of :func:`pytorch_only_options` or output option
        given.

    Notes
    -----
    The form defaults to ``power`` (:data:`CTRANSLATE2_DEFAULT_SEARCH`); a ``--length-penalty-form gnmt``
    given is refused rather than changed to ``power``: the two rank candidates differently, so a silent change
    would give other translations than asked for.
    """
    if settings.length_penalty_form != "power" and settings.length_penalty != 0:
        raise ValueError(
            "--engine ctranslate2 supports only --length-penalty-form power, its default (or --alpha 0); "
            "CTranslate2 divides scores by |Y|^alpha"
        )
    if settings.nbest > 1 or not settings.use_cache or precision != "fp32":
        raise ValueError(
            "--engine ctranslate2 does not take --nbest, --no-cache or --precision (use --compute-type)"
        )
    refused = [*pytorch_only_options(settings), *output_options]
    if refused:
        raise ValueError(f"--engine ctranslate2 does not take {', '.join(refused)} (use --engine pytorch)")


def translate_file_with_ctranslate2(
    model_dir: Path,
    settings: DecodeConfig,
    input_path: str | None,
    output_path: str | None,
    device: str = "auto",
    compute_type: str = "default",
    precision: str = "fp32",
    prefix_path: str | None = None,
    alignments: bool = False,
    scores: bool = False,
    use_vmap: bool = False,
    confidence: bool = False,
    flags: bool = False,
) -> None:
    """Translate a file (or standard input) with a directory written by ``transformer convert --to ctranslate2``.

    Parameters
    ----------
    model_dir : Path
        The export (:func:`ctranslate2_model_directory`).
    settings : DecodeConfig
        The search: beam size, alpha of the ``power`` penalty and the length offset.
    input_path : str or None
        Plain or gzipped text; None or "-" reads standard input.
    output_path : str or None
        The file to write (atomically); None or "-" writes standard output.
    device : str
        "auto", "cpu", "cuda" or "cuda:N" (already checked); a CUDA device runs on CTranslate2's GPU, "auto"
        on the CPU.
    compute_type : str
        CTranslate2's computation type, e.g. "default" or "int8".
    precision : str
        The ``--precision`` given, which must be fp32 (see :func:`check_ctranslate2_search`).
    prefix_path, alignments, scores : str or None, bool, bool
        ``--prefix-file``, ``--alignments`` and ``--scores`` as given: outputs only this project's translator
        produces, each refused when given.
    use_vmap : bool
        Decode with the export's vocabulary map (``--shortlist``: the checkpoint's shortlist, exported).
    confidence, flags : bool
        ``--confidence`` and ``--flags`` as given: refused, like ``--scores`` (this writer prints translations
        alone; flags need the PyTorch model's attention).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For settings CTranslate2 cannot follow (:func:`check_ctranslate2_search`), a directory that is not
        an export, bad input text or an output that is a directory.
    CorpusError
        When the input is unreadable or not UTF-8.
    ImportError
        When ``ctranslate2`` is not installed.

    Notes
    -----
    The settings are checked and the model loaded before the input is read, so a mistake fails before
    anyone types into standard input. Line i of the output is line i's translation, empty for an empty line,
    as :func:`~transformer.decoding.file_translation.translate_file` writes them.
    """
    given = {
        "--prefix-file": prefix_path is not None,
        "--alignments": alignments,
        "--scores": scores,
        "--confidence": confidence,
        "--flags": flags,
    }
    check_ctranslate2_search(settings, precision, [flag for flag, used in given.items() if used])
    translator = CTranslate2Translator.from_directory(
        model_dir, "cuda" if device.startswith("cuda") else "cpu", compute_type, use_vmap=use_vmap
    )
    sentences = read_input_lines(input_path)
    translations = translator.translate(
        sentences,
        beam_size=settings.beam_size,
        length_penalty=settings.length_penalty,
        max_length_offset=settings.max_length_offset,
    )
    write_output_lines(translations, output_path)


def ctranslate2_vocabulary_map(shortlist: bool | str) -> bool:
    """Turn ``--shortlist`` into CTranslate2's ``use_vmap``: the export's own map, never another file.

    Parameters
    ----------
    shortlist : bool or str
        ``--shortlist`` as parsed: False (absent), True (given alone) or a file name.

    Returns
    -------
    bool
        Whether to decode with the export's ``vmap.txt``.

    Raises
    ------
    ValueError
        For a file name: an export carries its checkpoint's shortlist as ``vmap.txt``, written by ``convert``.

    Notes
    -----
    CTranslate2 reads the map from the model directory only, so a shortlist file cannot be handed to it at
    translation time; convert the checkpoint again after ``transformer shortlist``.
    """
    if isinstance(shortlist, str):
        raise ValueError(
            f"--shortlist {shortlist}: with --engine ctranslate2 the export's own vmap.txt is used (written by "
            "'convert --to ctranslate2' from the checkpoint's shortlist); pass --shortlist alone"
        )
    return shortlist
