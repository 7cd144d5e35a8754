"""Several JAX processes on this machine, as on a cluster of hosts: `jax.distributed`
with a coordinator on 127.0.0.1 and CPU collectives over gloo (docs/sharding.md: sharding
across processes and orbax checkpoints).

Every test starts real processes (examples/sharded.py, or tests/sharding/multiprocess_worker.py
through the example's launcher) under a time limit, fails with their output when one
fails, and then checks that none of them is left running: each test marks its
processes with a unique environment variable and looks for it in /proc.

Marked `multiprocess` (about a minute on 2 cores): deselect with -m 'not multiprocess'.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from example_modules import STRICT, example_module

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("multiprocess_worker.py")
MARK = "TREECLASS_MULTIPROCESS_TEST"
LIMIT_S = 300  # the launcher's limit; the tests' own is a minute more


@pytest.fixture
def mark() -> Iterator[dict[str, str]]:
    """An environment with a unique mark; afterwards, no process may carry it."""
    token = uuid.uuid4().hex
    yield {**os.environ, MARK: token, "PYTHONUNBUFFERED": "1"}
    left = _marked(token)
    assert not left, f"processes left running: {left}"


def _marked(token: str, wait_s: float = 10.0) -> list[str]:
    """The command lines of the live processes whose environment holds the mark (a
    stopped process may take a moment to go; a zombie has no environment left)."""
    needle = f"{MARK}={token}".encode()
    end = time.monotonic() + wait_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle not in f.read().split(b"\0"):
                        continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode()
                found.append(f"{pid}: {command}")
            except OSError:  # gone, or not ours
                continue
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.2)


def _run(args: list[str], env: dict[str, str]) -> str:
    """Runs a Python script to the end; its output, or a failure showing it."""
    try:
        result = subprocess.run(  # our own scripts, with this interpreter
            [*STRICT, *args], capture_output=True, text=True,
            timeout=LIMIT_S + 60, env=env, check=False,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"no result after {error.timeout} s; output so far:\n{error.output}")
    output = f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert result.returncode == 0, f"exit code {result.returncode}\n{output}"
    return result.stdout


@pytest.mark.parametrize("processes", [2, 4])
def test_example_matches_one_device(processes: int, mark: dict[str, str], tmp_path: Path) -> None:
    # 8 devices in all (4 x 2 or 2 x 4); --quick sizes and 20 PLN steps: the process
    # boundary is what is tested here, the numerics are the same at any size.
    out = _run([str(ROOT / "examples" / "sharded.py"), "--quick", "--steps", "20",
                "--processes", str(processes), "--timeout", str(LIMIT_S),
                "--checkpoint", str(tmp_path)], mark)
    for line in (
        f"launching {processes} processes x {8 // processes} devices; coordinator 127.0.0.1:",
        f"[process 0] devices: 8 x cpu, in {processes} processes",
        "[process 0]   max |loss difference|",
        *(f"[process {i}] LIF: the spikes of the {8 // processes} shards here equal the "
          "one-device run's: True" for i in range(1, processes)),
        f"[process 0] orbax: the fitted PLN saved and restored from {processes} process(es); "
        "on the same shardings: True; equal: True",
        "[process 0] result: the sharded runs match the single-device runs",
        "all processes succeeded",
    ):
        assert line in out, f"missing {line!r} in:\n{out}"
    spikes = re.search(r"\[process 0\]   spikes: (\d+) on 1 device, (\d+) on 8; identical: True", out)
    assert spikes, out
    assert spikes[1] == spikes[2] != "0", out  # all 8 devices' spikes, summed across processes
    assert (tmp_path / "pln").is_dir()


def _launch(scenario: str, count: int, env: dict[str, str], folder: Path,
            timeout: float = LIMIT_S) -> tuple[int, str]:
    """Runs `count` test workers through the example's launcher: its exit code and the
    output it relayed."""
    with example_module("sharded", "sharded_launcher") as sharded:
        port = sharded.free_port()
        commands = [[*STRICT, str(WORKER), scenario, str(i), str(count),
                     f"127.0.0.1:{port}", str(folder)] for i in range(count)]
        out = folder / "launcher.log"
        with open(out, "w") as log:
            code = sharded.run_processes(commands, env=env, timeout=timeout, out=log)
        return code, out.read_text()


@pytest.fixture(scope="module")
def checkpoint_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """The `checkpoint` scenario on 2 processes, run once for the tests below."""
    token = uuid.uuid4().hex
    folder = tmp_path_factory.mktemp("checkpoint")
    code, out = _launch("checkpoint", 2, {**os.environ, MARK: token}, folder)
    left = _marked(token)
    assert not left, f"processes left running: {left}"
    return code, out, folder


def test_orbax_round_trip_across_processes(checkpoint_run: tuple[int, str, Path]) -> None:
    code, out, _ = checkpoint_run
    assert code == 0, out
    for rank in (0, 1):
        for line in (
            "ok: global x (8, 3) from 2 processes",
            "ok: orbax round trip from 2 processes; keys ['key', 'layers.0.b', "
            "'layers.0.w', 'layers.1.b', 'layers.1.w', 'x']",
            "ok: all",
        ):
            assert f"[process {rank}] {line}" in out, f"missing {line!r} in:\n{out}"


def test_save_refuses_arrays_spanning_processes(checkpoint_run: tuple[int, str, Path]) -> None:
    code, out, folder = checkpoint_run
    assert code == 0, out
    for rank in (0, 1):
        refusal = f"[process {rank}] ok: tc.save refused: "
        assert refusal in out, f"no refusal in:\n{out}"
        message = out.split(refusal, 1)[1].split("\n", 1)[0]
        assert "Model.x" in message, message  # the field
        assert "StandardCheckpointer" in message, message  # the orbax call to use
    assert not list(folder.glob("refused-*.npz"))


def test_failing_worker_stops_the_others(mark: dict[str, str], tmp_path: Path) -> None:
    code, out = _launch("crash", 2, mark, tmp_path)
    # Process 1's failure is what stopped the run: not the time limit (exit code 124),
    # not process 0 giving up on it (jax's own timeouts, minutes later).
    assert code == 1, out
    assert "[process 1] RuntimeError: worker 1 fails on purpose" in out
    assert "process 1 failed (exit code 1): stopping the others" in out
    assert "process 0 failed" not in out


def test_time_limit_stops_hung_workers(mark: dict[str, str], tmp_path: Path) -> None:
    code, out = _launch("hang", 2, mark, tmp_path, timeout=10)  # both start and print "ready" first
    assert code == 124, out
    assert out.count("ready") == 2, out
    assert "time limit (10 s) reached: stopping all processes" in out


def test_interrupt_stops_workers(mark: dict[str, str], tmp_path: Path) -> None:
    # Ctrl-C reaches the launcher only (the workers lead their own process groups):
    # the launcher must stop them itself. Here the launcher is a child, sent SIGINT.
    # SIGINT's default handler, as in a terminal, even where this suite runs with
    # SIGINT ignored (a background job of a shell without job control).
    script = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.path.insert(0, sys.argv[1]); import sharded; "
        "sharded.run_processes([[sys.executable, sys.argv[2], 'hang', str(i), '2', '-', '-'] "
        "for i in range(2)], timeout=120)"
    )
    launcher = subprocess.Popen(  # our own code, with this interpreter
        [sys.executable, "-c", script, str(ROOT / "examples"), str(WORKER)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=mark,
    )
    try:
        assert launcher.stdout is not None
        ready = 0
        for line in launcher.stdout:
            ready += line.rstrip().endswith("ready")
            if ready == 2:
                break
        launcher.send_signal(signal.SIGINT)
        out = launcher.communicate(timeout=60)[0]
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert ready == 2, out
    assert launcher.returncode == -signal.SIGINT, out  # KeyboardInterrupt, re-raised
    assert "KeyboardInterrupt" in out
