"""The package's layers, as docs/architecture.md draws them: which part may import which.

Every ``import`` of a ``transformer`` module is read from the source (function-level imports included, so a
lazy import cannot hide a dependency) and mapped to its part: a subpackage (``model``, ``data``, ...) or a
top-level module (``checkpoint``, ``config``, ...). Each part may import only the parts listed for it below;
the listing is acyclic, so the package has no import cycle between its parts. Inside ``data`` the same holds for
its layers (:data:`DATA_LAYERS`): the input pipeline, the corpora and the preparation that joins them.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer"

#: Part -> the parts it may import. Keep in step with docs/architecture.md ("Layers").
ALLOWED: dict[str, set[str]] = {
    "atomic_files": set(),
    "metrics_log": {"atomic_files"},
    "safetensors_files": set(),
    "allocator": set(),
    "launcher": {"allocator", "cli"},
    "command_checks": {"atomic_files"},
    "typed_fields": set(),
    "device": set(),
    "loss": set(),
    "model": {"typed_fields"},
    "baselines": {"model", "typed_fields"},
    "architectures": {"model", "baselines"},
    "kernels": {"model"},
    "config": {"model", "baselines", "architectures", "typed_fields"},
    "data": {"config", "atomic_files", "command_checks"},
    "checkpoint": {
        "model",
        "architectures",
        "config",
        "data",
        "typed_fields",
        "atomic_files",
        "safetensors_files",
    },
    "averaging": {"checkpoint", "atomic_files"},
    "decoding": {
        "model",
        "baselines",
        "architectures",
        "config",
        "data",
        "checkpoint",
        "device",
        "evaluation",
        "autotune",  # fp32_kernels: auto, the probe that picks MKL or oneDNN per linear layer
        "kernels",  # the native (C++) int8 decoder step
    },
    "evaluation": {"model", "architectures", "data", "loss"},
    "visualization": {"model", "architectures", "data", "decoding", "atomic_files", "metrics_log"},
    "autotune": {"model", "baselines", "device", "atomic_files"},
    "interop": {
        "model",
        "config",
        "data",
        "checkpoint",
        "decoding",
        "evaluation",  # an ONNX export's perplexity result
        "typed_fields",  # an ONNX export's stored search settings
        "atomic_files",
        "command_checks",
    },
    "training": {
        "model",
        "architectures",
        "config",
        "data",
        "checkpoint",
        "device",
        "loss",
        "evaluation",
        "autotune",
        "atomic_files",
        "safetensors_files",
        "allocator",
        "metrics_log",
    },
    "experiments": {
        "architectures",
        "command_checks",
        "device",
        "atomic_files",
        "loss",
        "model",
        "config",
        "data",
        "checkpoint",
        "averaging",
        "decoding",
        "evaluation",
        "visualization",
        "autotune",
        "training",
        "metrics_log",
    },
    "distillation": {
        "architectures",
        "atomic_files",
        "autotune",  # usable_cpus: the teacher's pass shares the machine's CPUs among its processes
        "averaging",
        "checkpoint",
        "config",
        "data",
        "decoding",
        "device",
        "evaluation",
        "training",  # the student trains through the ordinary trainer (and its process group)
    },
    "serving": {
        "model",
        "architectures",
        "config",
        "data",
        "checkpoint",
        "decoding",
        "interop",
        "visualization",
        "typed_fields",
        "command_checks",  # a request's text is refused as the command line refuses it
        "autotune",  # the fp32_kernels choices
        "kernels",  # the native decoder step the continuous batch runs
    },
    "cli_arguments": {
        "command_checks",
        "config",
        "checkpoint",
        "decoding",
        "device",
        "experiments",
        "serving",
        "autotune",  # the --fp32-kernels choices
    },
    "cli": {
        "cli_arguments",
        "cli_commands",
        "training",
    },  # training: main turns TrainingDivergedError into one line
    "cli_commands": {
        "cli_arguments",
        "device",
        "serving",
        "experiments",
        "atomic_files",
        "command_checks",
        "model",
        "architectures",
        "config",
        "data",
        "checkpoint",
        "averaging",
        "decoding",
        "evaluation",
        "visualization",
        "interop",
        "training",
        "distillation",
    },
    "transformer": {"model", "config", "decoding", "baselines"},  # the package's __init__: the public API
}


#: The data package's layers, finer than its part (#30 item 3): the input pipeline (``data/pipeline/``) knows no
#: corpus, the corpora (``data/corpora/``) read and check their text with the pipeline, and ``data/prepare.py``
#: (with the package's ``__init__``, layer ``data``) joins the two for a run's data config. Each layer may import
#: only the layers and parts listed; what it names outside ``data`` must be in ``ALLOWED["data"]``. Keep in step
#: with docs/architecture.md ("Layers").
DATA_LAYERS: dict[str, set[str]] = {
    "data.pipeline": {"atomic_files"},
    "data.corpora": {"data.pipeline", "atomic_files"},
    "data": {"data.pipeline", "data.corpora", "config", "command_checks", "atomic_files"},
}


def part_of(module: str) -> str:
    """Map ``transformer.model.decoder`` to ``model``, ``transformer.checkpoint`` to ``checkpoint``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "transformer"


def data_layer_of(module: str) -> str:
    """Map ``transformer.data.pipeline.batch`` to ``data.pipeline``, ``transformer.data.prepare`` to ``data``.

    A module outside the data package maps to its part, as :func:`part_of` gives it.
    """
    layer = ".".join(module.split(".")[1:3])
    return layer if layer in DATA_LAYERS else part_of(module)


def module_name(path: Path) -> str:
    """The dotted name of a source file of the package."""
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(relative.parts).removesuffix(".__init__")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every ``transformer`` module a file imports, with the line of the import."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, alias.name) for alias in node.names if alias.name.startswith("transformer")
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "transformer":  # from transformer import atomic_files
                found += [(node.lineno, f"transformer.{alias.name}") for alias in node.names]
            elif node.module.startswith("transformer."):
                found.append((node.lineno, node.module))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_is_listed_and_the_listing_has_no_cycle() -> None:
    parts = {part_of(module_name(path)) for path in SOURCES}
    assert parts == set(ALLOWED)
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(part: str, chain: list[str]) -> None:
        assert part not in visiting, f"cycle: {' -> '.join([*chain, part])}"
        if part in done:
            return
        visiting.add(part)
        for imported in ALLOWED[part]:
            visit(imported, [*chain, part])
        visiting.discard(part)
        done.add(part)

    for part in ALLOWED:
        visit(part, [])


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_imports_follow_the_layers(path: Path) -> None:
    importer = part_of(module_name(path))
    wrong = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {importer} imports {module} ({part_of(module)})"
        for line, module in imported_modules(path)
        if part_of(module) != importer and part_of(module) not in ALLOWED[importer]
    ]
    assert not wrong, "\n".join(wrong)


DATA_SOURCES = [path for path in SOURCES if part_of(module_name(path)) == "data"]


def test_every_data_module_has_a_layer_and_the_layers_have_no_cycle() -> None:
    assert {data_layer_of(module_name(path)) for path in DATA_SOURCES} == set(DATA_LAYERS)
    outside = {name for allowed in DATA_LAYERS.values() for name in allowed if name not in DATA_LAYERS}
    assert outside <= ALLOWED["data"]
    remaining = dict(DATA_LAYERS)
    while remaining:  # peel off the layers that import no remaining layer; a cycle leaves none to peel
        lowest = {layer for layer, allowed in remaining.items() if not allowed & set(remaining) - {layer}}
        assert lowest, f"cycle among the data layers: {sorted(remaining)}"
        for layer in lowest:
            del remaining[layer]


@pytest.mark.parametrize("path", DATA_SOURCES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_data_imports_follow_the_data_layers(path: Path) -> None:
    importer = data_layer_of(module_name(path))
    wrong = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {importer} imports {module} ({data_layer_of(module)})"
        for line, module in imported_modules(path)
        if data_layer_of(module) != importer and data_layer_of(module) not in DATA_LAYERS[importer]
    ]
    assert not wrong, "\n".join(wrong)


def test_only_the_command_line_and_the_experiments_import_training() -> None:
    importers = {
        module_name(path)
        for path in SOURCES
        for _, module in imported_modules(path)
        if part_of(module) == "training"
        and part_of(module_name(path)) not in ("training", "experiments", "distillation")
    }
    assert importers == {"transformer.cli", "transformer.cli_commands.training"}


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    source = tmp_path / "lazy.py"
    source.write_text(
        "import os\n"
        "from transformer import atomic_files\n"
        "def later():\n"
        "    from transformer.training.trainer import Trainer\n"
        "    import transformer.model.masks\n",
        encoding="utf-8",
    )
    assert imported_modules(source) == [
        (2, "transformer.atomic_files"),
        (4, "transformer.training.trainer"),
        (5, "transformer.model.masks"),
    ]


def module_graph() -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports (at any depth of its code)."""
    modules = {module_name(path): path for path in SOURCES}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = set()
        for _, target in imported_modules(path):
            # ``from transformer import x`` names the module x; a name that is not a module is its package's.
            module = target if target in modules else target.rsplit(".", 1)[0]
            if module in modules:
                imported.add(module)
        graph[name] = imported - {name}
    return graph


def test_no_module_imports_itself_through_others() -> None:
    """Zero import circles between modules, deferred imports inside functions included (#30 item 4)."""
    graph = module_graph()
    assert graph["transformer.decoding.step_model"] >= {"transformer.baselines.rnn_step_model"}
    finished: set[str] = set()

    def visit(module: str, chain: list[str]) -> None:
        assert module not in chain, f"import circle: {' -> '.join([*chain[chain.index(module) :], module])}"
        if module in finished:
            return
        for target in sorted(graph[module]):
            visit(target, [*chain, module])
        finished.add(module)

    for module in sorted(graph):
        visit(module, [])
