"""``transformer serve`` refuses bad options with one line and status 2, before serving anything."""

import shlex
import socket
from pathlib import Path

import pytest

from transformer.cli import main


@pytest.fixture
def workspace(served_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "run").symlink_to(served_run)
    (tmp_path / "no-keys.txt").write_text("# only a comment\n\n", encoding="utf-8")
    (tmp_path / "spaced-key.txt").write_text("good-key\nbad key\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("--checkpoint nowhere", "nowhere"),
        ("--checkpoint =run", "the model name must be letters, digits"),
        ("--checkpoint 'a b=run'", "the model name must be letters, digits"),
        ("--checkpoint a=", "no directory after '='"),
        ("--checkpoint a=run --checkpoint a=run", "model 'a' lists 'run' twice"),
        ("--checkpoint run --port 70000", "--port"),
        ("--checkpoint run --max-queue 0", "--max-queue"),
        ("--checkpoint run --max-chars -5", "--max-chars"),
        ("--checkpoint run --max-batch-tokens many", "--max-batch-tokens"),
        ("--checkpoint run --batching step", "--batching"),
        ("--checkpoint run --engine tensorrt", "--engine"),
        ("--checkpoint run --device gpu", "--device"),
        ("--checkpoint run --api-keys missing.txt", "--api-keys missing.txt: cannot read it"),
        ("--checkpoint run --api-keys no-keys.txt", "--api-keys no-keys.txt: no key in the file"),
        ("--checkpoint run --api-keys spaced-key.txt", "--api-keys spaced-key.txt:2: a key may not contain"),
        ("--checkpoint run --host 203.0.113.9", "--host 203.0.113.9 --port 0: cannot listen there"),
    ],
)
def test_bad_options_give_one_line_and_status_2(
    workspace: Path, capsys, arguments: str, message: str
) -> None:
    status = main(["serve", "--port", "0", *shlex.split(arguments)])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("transformer serve: error: "), captured.err
    assert message in lines[0]


def test_a_port_in_use_is_named(workspace: Path, capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--checkpoint", "run", "--port", str(port)]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error
        == f"transformer serve: error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use)"
    )


def test_models_load_in_a_thread_that_ends_before_the_server_starts(served_run: Path, monkeypatch) -> None:
    """The main thread runs no PyTorch operator, so no OpenMP team of its own competes with the worker's."""
    import threading

    from transformer.serving import server
    from transformer.serving.config import ServeConfig

    real_load = server.load_served_model
    loading_threads: list[threading.Thread] = []

    def recording_load(*args, **kwargs):
        loading_threads.append(threading.current_thread())
        return real_load(*args, **kwargs)

    monkeypatch.setattr(server, "load_served_model", recording_load)
    config = ServeConfig(checkpoints={"a": served_run, "b": served_run})
    models = server.load_models_off_the_main_thread(config)
    assert list(models) == ["a", "b"]
    assert len(loading_threads) == 2 and loading_threads[0] is loading_threads[1]
    assert loading_threads[0] is not threading.main_thread() and not loading_threads[0].is_alive()
    with pytest.raises(ValueError, match="missing"):  # a loading error reaches the caller's thread
        server.load_models_off_the_main_thread(ServeConfig(checkpoints={"a": served_run / "missing"}))


def test_connections_to_the_listening_socket_send_without_nagle_delay() -> None:
    """Each response's last small segment goes out at once, not after the client's delayed ACK (40 ms).

    asyncio sets TCP_NODELAY only on connections whose socket says IPPROTO_TCP; the listening socket used to
    say 0, and every keep-alive request after a connection's first took 44 ms more (the quiet benchmark's
    one-client p50 100 ms against 55 ms offline).
    """
    import asyncio
    import time

    from transformer.serving.server import bind_socket

    listening = bind_socket("127.0.0.1", 0)
    port = listening.getsockname()[1]
    nodelay: list[int] = []

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = writer.get_extra_info("socket")
        nodelay.append(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        while await reader.readline():
            writer.write(b"head")  # two small writes per answer, as uvicorn writes headers, then body
            await writer.drain()
            writer.write(b"body\n")
            await writer.drain()
        writer.close()

    async def exchange() -> list[float]:
        server = await asyncio.start_server(respond, sock=listening)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        times = []
        for _ in range(7):
            start = time.perf_counter()
            writer.write(b"ask\n")
            await writer.drain()
            assert await reader.readline() == b"headbody\n"
            times.append(time.perf_counter() - start)
        writer.close()
        server.close()
        await server.wait_closed()
        return times

    times = asyncio.run(exchange())
    assert nodelay and nodelay[0] != 0
    assert sorted(times)[3] < 0.02  # the median: with Nagle on, every exchange after the first took >= 40 ms
