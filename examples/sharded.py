"""Data parallel on N devices, in one process or several: the PLN fit split over
samples and a LIF population split over neurons, each checked against the same run on
one device; then the fitted model saved and restored, sharded, with orbax.

The models are the ones in `pln.py` and `neuron_models.py`, unchanged: their array
fields name a logical axis (`tc.field(axes=("samples", None))`, `axes=("neurons",)`),
so `tc.shardings(model, mesh)` lays them out, and the jitted methods (`PLN.fit`, a
`lax.scan` over `LIF.step`) run on the sharded instance as they are: XLA splits the
per-sample (per-neuron) work and inserts the reductions across devices.

With `--processes P` the script starts P local worker processes (itself, with
`--process-id I --coordinator 127.0.0.1:PORT`, the command line that each host of a
cluster runs) and waits for them. Each is one host of a cluster as `jax.distributed`
sees it: it joins a coordinator on 127.0.0.1, owns N/P host devices and 1/P of the
samples and neurons, and builds the global arrays from its own part with
`jax.make_array_from_process_local_data`. The devices of all processes form one mesh,
and the reductions cross the process boundary (gloo over TCP, on the loopback
interface only). docs/sharding.md says how to run the same code on a real cluster.

XLA reads `--xla_force_host_platform_device_count` once, before jax is imported: that
is why jax is imported inside the functions, after the arguments are parsed.

    python examples/sharded.py                   # 1 process x 8 host devices
    python examples/sharded.py --processes 2     # 2 processes x 4 host devices
    python examples/sharded.py --quick           # smaller, for the tests
    # on each of 2 hosts, I = 0 or 1; --devices counts all hosts' devices, and the
    # --checkpoint folder must be one that every host sees:
    python examples/sharded.py --processes 2 --process-id I --coordinator HOST0:PORT \
        --devices 16 --checkpoint /shared/ckpt
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import IO, Any, TypeVar

HERE = Path(__file__).resolve().parent
LOOPBACK = "127.0.0.1"
T = TypeVar("T")

# --- starting and stopping local worker processes -------------------------------------


def free_port() -> int:
    """A TCP port free on the loopback interface now (another program may take it
    before the coordinator binds it: then the workers fail, and are stopped)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def worker_env(devices: int) -> dict[str, str]:
    """This environment, less proxies, plus what a local worker needs: `devices` CPU
    devices, unbuffered output (the launcher relays it line by line)."""
    # No proxy: gRPC (the coordinator's transport) would send even loopback traffic
    # through an http_proxy, and jax warns that proxies can hang its initialisation.
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_processes(
    commands: Sequence[Sequence[str]],
    *,
    env: dict[str, str] | None = None,
    timeout: float,
    out: IO[str] = sys.stdout,
) -> int:
    """Runs each command as a child process and relays its output, each line prefixed
    `[process i]`. Returns 0 once all exit with 0. As soon as one fails, or at the
    time limit (returns 124), or on Ctrl-C (re-raised), stops all of them.

    Each child leads its own process group, so stopping one (SIGTERM to the group, then
    SIGKILL after 5 s) also stops anything it started, and Ctrl-C in a terminal reaches
    only this launcher, which then stops the children itself, in `finally`.
    """
    children: list[subprocess.Popen[str]] = []
    relays: list[threading.Thread] = []
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, file=out, flush=True)

    try:
        for i, command in enumerate(commands):
            child = subprocess.Popen(  # noqa: S603 - our own commands, no shell
                list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                env=env, start_new_session=True,
            )
            children.append(child)
            relay = threading.Thread(target=_relay, args=(child, f"[process {i}] ", say))
            relay.start()
            relays.append(relay)
        deadline = time.monotonic() + timeout
        while True:
            codes = [c.poll() for c in children]
            failed = [(i, code) for i, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                i, code = failed[0]
                say(f"process {i} failed (exit code {code}): stopping the others")
                return code if code > 0 else 128 - code  # -N: killed by signal N
            if all(code == 0 for code in codes):
                return 0
            if time.monotonic() > deadline:
                say(f"time limit ({timeout:.0f} s) reached: stopping all processes")
                return 124
            time.sleep(0.05)
    finally:
        stop(children)
        for relay in relays:
            relay.join(timeout=5)
        for child in children:
            if child.stdout is not None:
                child.stdout.close()


def stop(children: Sequence[subprocess.Popen[Any]], grace: float = 5.0) -> None:
    """SIGTERM to each running child's process group, SIGKILL to those still running
    `grace` seconds later; every child is reaped (no zombie is left)."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for child in children:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # exited in between
                    os.killpg(child.pid, signum)
        end = time.monotonic() + grace
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(end - time.monotonic(), 0.01))
        if all(child.poll() is not None for child in children):
            return


def _relay(child: subprocess.Popen[str], prefix: str, say: Callable[[str], None]) -> None:
    assert child.stdout is not None
    for line in child.stdout:
        # gloo reports each connection on stderr; one line per device pair is noise.
        if not line.startswith("[Gloo] Rank"):
            say(prefix + line.rstrip("\n"))


# --- inside a worker ----------------------------------------------------------------------


def host_devices(count: int) -> None:
    """Asks XLA for `count` CPU devices; works only before jax is imported."""
    if "jax" not in sys.modules:
        os.environ.update({"XLA_FLAGS": worker_env(count)["XLA_FLAGS"]})


def join(coordinator: str, count: int, rank: int, timeout: float = 300) -> None:
    """Makes this process number `rank` of `count`, with the coordinator at
    `coordinator` (`HOST:PORT`; process 0 runs it) and CPU collectives over gloo. An
    uncaught error ends the process at once.

    A loopback coordinator means every process is on this machine (the launcher's
    workers): then the coordinator and gloo listen on loopback only, and a process
    also ends when its launcher dies (else a killed launcher would leave it behind).
    """
    import jax
    from jax._src.lib import _jax

    local = coordinator.rsplit(":", 1)[0] in (LOOPBACK, "localhost")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if local:
        # Gloo listens on the address this machine's hostname resolves to, which may
        # be a network interface. jax (0.7 to 0.10) builds gloo through this jaxlib
        # function without a hostname, so we supply one.
        gloo = _jax.make_gloo_tcp_collectives
        _jax.make_gloo_tcp_collectives = lambda **kw: gloo(**{"hostname": LOOPBACK, **kw})
    jax.distributed.initialize(
        coordinator_address=coordinator,
        # jax's default binds every interface ([::]:PORT), for the other hosts.
        coordinator_bind_address=coordinator if local else None,
        num_processes=count,
        process_id=rank,
        initialization_timeout=int(timeout),
    )

    # jax.distributed shuts down at exit behind a barrier that waits for every process
    # (up to 5 minutes): a process that failed would hang there, looking alive to its
    # launcher, while the others wait for it.
    def fail_fast(*error: Any) -> None:
        sys.__excepthook__(*error)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    sys.excepthook = fail_fast
    if not local:
        return
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def from_process_local(local: T, mesh: Any, axis: str) -> T:
    """The global instance whose `axis` dimensions are every process's `local` ones,
    in process order; the leaves without `axis` must be equal on every process.

    Shapes come from `tc.partition_specs` (which leaves carry `axis`) and shardings
    from `tc.shardings` of the *global* shapes: divisibility is about the whole array
    split over all devices, not one process's part.
    """
    import jax
    import numpy as np

    import treeclass as tc

    count = jax.process_count()

    def global_shape(leaf: Any, spec: Any) -> Any:
        shape = [n * count if name == axis else n for n, name in zip(
            np.shape(leaf), (*spec, *[None] * np.ndim(leaf)), strict=False)]
        return jax.ShapeDtypeStruct(tuple(shape), np.asarray(leaf).dtype)

    abstract = jax.tree.map(global_shape, local, tc.partition_specs(local))
    return jax.tree.map(
        lambda s, a, x: jax.make_array_from_process_local_data(s, np.asarray(x), a.shape),
        tc.shardings(abstract, mesh), abstract, local,
    )


def sibling(name: str) -> ModuleType:
    """Imports a sibling example module by path (examples/ is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- the example ------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=8,
                        help="devices of all processes together (8)")
    parser.add_argument("--processes", type=int, default=1,
                        help="processes (1); started here unless --process-id is given")
    parser.add_argument("--quick", action="store_true", help="small sizes, for the tests")
    parser.add_argument("--steps", type=int, help="PLN iterations (300; 50 with --quick)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before the workers are stopped (600)")
    parser.add_argument("--checkpoint", type=Path,
                        help="orbax checkpoint folder (default: a temporary one, removed)")
    # With both, this process is one of --processes: on a cluster, run this script on
    # every host with its own --process-id (the launcher runs its workers so).
    parser.add_argument("--process-id", type=int, metavar="I",
                        help="join as process I (0 runs the coordinator)")
    parser.add_argument("--coordinator", metavar="HOST:PORT",
                        help="process 0's address, the same for all")
    args = parser.parse_args(argv)
    if args.processes < 1 or args.devices < 1 or args.devices % args.processes:
        parser.error(f"--devices ({args.devices}) must be a positive multiple of "
                     f"--processes ({args.processes})")
    if (args.process_id is None) != (args.coordinator is None):
        parser.error("--process-id and --coordinator go together")
    if args.process_id is not None and not 0 <= args.process_id < args.processes:
        parser.error(f"--process-id must be in 0..{args.processes - 1}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.processes == 1 or args.process_id is not None:
        return run(args)
    folder = args.checkpoint or Path(tempfile.mkdtemp(prefix="treeclass-sharded-"))
    coordinator = f"{LOOPBACK}:{free_port()}"
    per_process = args.devices // args.processes
    print(f"launching {args.processes} processes x {per_process} devices; coordinator "
          f"{coordinator}; time limit {args.timeout:.0f} s", flush=True)
    given = sys.argv[1:] if argv is None else argv
    commands = [[sys.executable, __file__, *given, "--checkpoint", str(folder),
                 "--process-id", str(i), "--coordinator", coordinator]
                for i in range(args.processes)]
    # SIGTERM (a job scheduler, `timeout`) becomes an exception, so `finally` stops the
    # workers; Ctrl-C already is one.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        code = run_processes(commands, env=worker_env(per_process), timeout=args.timeout)
    except KeyboardInterrupt:
        print("interrupted: all processes stopped", file=sys.stderr)
        code = 130
    finally:
        if args.checkpoint is None:
            shutil.rmtree(folder, ignore_errors=True)
    print("all processes succeeded" if code == 0 else f"failed (exit code {code})")
    return code


def run(args: argparse.Namespace) -> int:
    """One process's part: all of it with --processes 1, else worker --process-id's."""
    host_devices(args.devices // args.processes)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils

    if args.processes > 1:
        join(args.coordinator, args.processes, args.process_id, args.timeout)
    rank, count = jax.process_index(), jax.process_count()
    if jax.device_count() < args.devices:
        print(f"only {jax.device_count()} devices; asked for {args.devices}", file=sys.stderr)
        return 2
    pln, neurons = sibling("pln"), sibling("neuron_models")
    say = print if rank == 0 else _quiet
    say(f"devices: {args.devices} x {jax.devices()[0].platform}"
        + (f", in {count} processes" if count > 1 else ""))
    # Auto axes: XLA decides how the code between the sharded inputs and outputs is
    # split (jax's default, Explicit, would ask the model code to say, e.g. at M.T @ M).
    # Devices in process order, so that process i's rows come i-th in the global arrays.
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))

    def mesh(axis: str) -> Any:
        auto = (jax.sharding.AxisType.Auto,)
        return jax.make_mesh((args.devices,), (axis,), axis_types=auto, devices=devices)

    # --- PLN: samples split across devices (and processes) ------------------------------
    steps = args.steps or (50 if args.quick else 300)
    n, p, d = (400, 5, 2) if args.quick else (2000, 20, 2)
    # Every process draws the same data and keeps its own rows: the stand-in for each
    # host reading its part of a data set.
    data = pln.simulate(n=n, p=p, d=d, seed=0)
    rows = slice(rank * n // count, (rank + 1) * n // count)
    local = pln.PLN.from_data(data.Y[rows], data.O[rows], data.X[rows])
    # A constant of the loss, summed over all samples: each process sums its rows (in
    # float64) and the float32 partial sums are added, in another order than the
    # one-device run's single float64 sum (a difference in the last float32 bit).
    parts = multihost_utils.process_allgather(np.float32(pln.log_stirling_sum(data.Y[rows])))
    local = local.replace(n=n, log_y_factorial=jnp.asarray(np.sum(parts), jnp.float32))
    sharded = from_process_local(local, mesh("samples"), "samples")
    say(f"PLN: n={n}, p={p}, d={d}; Y {sharded.Y.sharding.spec}, "
        f"M {sharded.params.M.sharding.spec}, Sigma {sharded.Sigma.sharding.spec}; "
        f"per-device Y shard {sharded.Y.addressable_shards[0].data.shape}")
    start = time.perf_counter()
    fitted, losses = sharded.fit(steps)
    # Replicated (every device holds all of it): every process can read it, no gather.
    losses_many = np.asarray(losses)
    many_s = time.perf_counter() - start
    pln_ok = True
    if rank == 0:
        start = time.perf_counter()
        losses_one = np.asarray(pln.PLN.from_data(data.Y, data.O, data.X).fit(steps)[1])
        one_s = time.perf_counter() - start
        # Not bit for bit: with D devices each sum over samples adds D partial sums, in
        # another order than one device does, so the last float32 bits differ. The
        # tutorial's optimizer (RAdam with a constant step, clipped) stops descending
        # after ~200 iterations and jitters, which lets such differences grow; so the
        # whole trajectory is compared at a relative 1e-3, and the first 100
        # iterations, still descending, at 1e-5.
        scale = np.max(np.abs(losses_one))
        rel = float(np.max(np.abs(losses_many - losses_one)) / scale)
        early = float(np.max(np.abs(losses_many[:100] - losses_one[:100])) / scale)
        say(f"  loss {losses_one[0]:.2f} -> {losses_one[-1]:.2f} on 1 device; "
            f"{losses_many[0]:.2f} -> {losses_many[-1]:.2f} on {args.devices}")
        say(f"  max |loss difference| / max |loss|: {rel:.1e} over {steps} iterations "
            f"(tolerance 1e-3), {early:.1e} over the first 100 (tolerance 1e-5)")
        say(f"  compile + run: {one_s:.2f} s on 1 device, {many_s:.2f} s on {args.devices}")
        pln_ok = rel < 1e-3 and early < 1e-5
    say(f"  fitted M stays split: {fitted.params.M.sharding.spec}")

    # --- LIF: a population split across devices (and processes) -------------------------
    size, length = (4096, 200) if args.quick else (80_000, 2000)
    lif = neurons.LIF.create(1)
    # Neuron i starts i/size of the way from V_reset to V_th, so that the neurons fire
    # out of phase; each process builds only its own neurons.
    def start_v(first: int, stop: int) -> Any:
        i = np.arange(first, stop, dtype=np.float32)
        return (lif.V_reset + (lif.V_th - lif.V_reset) * i / size).astype(np.float32)

    mine = start_v(rank * size // count, (rank + 1) * size // count)
    split = from_process_local(neurons.LIF.create(len(mine), V=mine), mesh("neurons"), "neurons")
    currents = jnp.full((length,), 25.0, dtype=jnp.float32)
    final_many, trace_many = neurons.simulate(split, currents)
    # The reference: the whole population on one device (this process's first). Each
    # process compares the shards it holds: the part of the sharded run it can see.
    one = np.asarray(neurons.simulate(neurons.LIF.create(size, V=start_v(0, size)),
                                      currents)[1].spike)
    same = all(np.array_equal(np.asarray(s.data), one[s.index])
               for s in trace_many.spike.addressable_shards)
    total = int(jax.jit(jnp.sum)(trace_many.spike))  # over all processes; replicated
    say(f"LIF: {size} neurons x {length} steps; V {split.V.sharding.spec}, "
        f"per-device shard {split.V.addressable_shards[0].data.shape}")
    say(f"  spikes: {int(one.sum())} on 1 device, {total} on {args.devices}; "
        f"identical: {same}")
    if rank > 0:
        print(f"LIF: the spikes of the {len(trace_many.spike.addressable_shards)} shards "
              f"here equal the one-device run's: {same}")
    say(f"  final V stays split: {final_many.V.sharding.spec}")

    checkpoint_ok = checkpoint(fitted, args.checkpoint, say)
    ok = pln_ok and same and checkpoint_ok
    say("result: the sharded runs match the single-device runs" if ok else "result: MISMATCH")
    return 0 if ok else 1


def checkpoint(model: Any, folder: Path | None, say: Callable[..., None]) -> bool:
    """Saves `model` (sharded) with orbax from every process, restores it onto the
    shardings `tc.shardings` gives, and checks that the restored model equals it."""
    import jax

    import treeclass as tc

    try:
        import orbax.checkpoint as ocp
    except ImportError:
        say("orbax: not installed (pip install 'treeclass[scale]'); checkpoint skipped")
        return True
    if folder is None and jax.process_count() > 1:
        say("orbax: checkpoint skipped: pass --checkpoint DIR, a folder all processes see")
        return True
    temporary = folder is None
    folder = Path(tempfile.mkdtemp(prefix="treeclass-sharded-")) if folder is None else folder
    try:
        with ocp.StandardCheckpointer() as checkpointer:
            # Every process calls save with the same path; each writes its own shards,
            # keyed by field path (params.M, ...), and process 0 the metadata.
            checkpointer.save(folder.resolve() / "pln", model, force=True)
            checkpointer.wait_until_finished()
            # The target: shapes, dtypes and shardings, no values.
            shardings = tc.shardings(model, model.Y.sharding.mesh)
            target = jax.tree.map(
                lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), model, shardings
            )
            restored = checkpointer.restore(folder.resolve() / "pln", target)
    finally:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
    placed = all(a.sharding == s for a, s in zip(
        jax.tree.leaves(restored), jax.tree.leaves(shardings), strict=True))
    equal = bool(jax.jit(tc.tree_equal)(restored, model))
    say(f"orbax: the fitted PLN saved and restored from {jax.process_count()} process(es); "
        f"on the same shardings: {placed}; equal: {equal}")
    return placed and equal


def _quiet(*_: object, **__: object) -> None:
    """`print` on the processes other than the first: one report, not P."""


if __name__ == "__main__":
    raise SystemExit(main())
