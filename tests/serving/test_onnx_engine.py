"""``serve --engine onnxruntime``: an ONNX export served with request batching, as ``translate`` gives."""

import dataclasses
from pathlib import Path

import pytest

from transformer.checkpoint.layout import resolve_checkpoint
from transformer.serving.config import ServeConfig
from transformer.serving.served_model import checkpoint_languages

for package in ("onnx", "onnxscript", "onnxruntime"):
    pytest.importorskip(package)


def test_translations_and_scores_are_the_translate_commands(
    make_client, onnx_export: Path, served_run: Path, valid_sentences: list[str]
) -> None:
    from transformer.interop.onnx_translation import OnnxTranslator

    client = make_client(checkpoints={"onnx": onnx_export}, engine="onnxruntime", batching="request")
    sentences = valid_sentences[:8]
    reference = OnnxTranslator.from_directory(onnx_export)
    stored = reference.decode_config  # the checkpoint's run's, which the server starts from too
    for beam in (1, 4):
        reference.decode_config = dataclasses.replace(stored, beam_size=beam, length_penalty=0.6)
        reply = client.post("/v1/translate", json={"text": sentences, "beam": beam, "alpha": 0.6})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        candidates = reference.translate_nbest(sentences)
        assert body["translation"] == [found[0].text for found in candidates]
        for sentence, found in zip(body["sentences"], candidates, strict=True):
            assert sentence[0]["score"] == pytest.approx(found[0].score, abs=1e-5)
    source, target = checkpoint_languages(resolve_checkpoint(served_run))  # the run's, stored in the export
    model = client.get("/v1/models").json()["models"][0]
    assert (model["source"], model["target"]) == (source, target) != ("und", "und")
    libre = client.post("/translate", json={"q": sentences[0], "source": source, "target": target})
    assert libre.status_code == 200, libre.text
    reference.decode_config = stored  # LibreTranslate's clients get the model's own search
    assert libre.json()["translatedText"] == reference.translate(sentences[:1])[0]
    int8 = make_client(checkpoints={"onnx": onnx_export}, engine="onnxruntime", precision="int8")
    assert int8.post("/v1/translate", json={"text": sentences[:2]}).status_code == 200


def test_what_onnxruntime_cannot_serve_is_refused(make_client, onnx_export: Path, tmp_path: Path) -> None:
    client = make_client(checkpoints={"onnx": onnx_export}, engine="onnxruntime", batching="request")
    for field in ({"sampling": True}, {"alignments": True}, {"flags": True}):
        reply = client.post("/v1/translate", json={"text": ["A cow."], **field})
        assert reply.status_code == 422
        assert "runs on onnxruntime" in reply.json()["detail"]
    models = client.get("/v1/models").json()["models"]
    assert models[0]["flags"] is False and models[0]["attention"] is False
    with pytest.raises(ValueError, match="--engine onnxruntime --batching continuous"):
        ServeConfig(checkpoints={"a": tmp_path}, engine="onnxruntime", batching="continuous")
    # Left out, batching follows the engine, as serve's --batching does.
    assert ServeConfig(checkpoints={"a": tmp_path}, engine="onnxruntime").batching == "request"
    assert ServeConfig(checkpoints={"a": tmp_path}, engine="ctranslate2").batching == "request"
    assert ServeConfig(checkpoints={"a": tmp_path}).batching == "continuous"
    with pytest.raises(ValueError, match="does not take --precision bf16, --shortlist"):
        make_client(
            checkpoints={"onnx": onnx_export},
            engine="onnxruntime",
            precision="bf16",
            shortlist=True,
            batching="request",
        )
