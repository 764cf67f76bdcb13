"""Device ceilings: matmul FLOP/s per dtype at prefill-like (square) and decode-like (skinny) shapes,
copy bandwidth, and all-reduce bus bandwidth across GPUs. A ceiling is the fastest timed sample (other
processes and CPU-quota throttling only ever slow a sample down).

Sizes grow geometrically from a small probe while the next size is predicted to fit its share of the
time budget and of the memory cap, so a slow dtype (bf16 on a CPU without bf16 units runs at well
under 1 GFLOP/s) costs a fraction of a second instead of minutes. torch is only used inside functions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from planner.calibration.context import ProfileContext
from planner.calibration.device import BYTES_PER_ELEMENT
from planner.calibration_record import (
    AllReduceMeasurement,
    BandwidthMeasurement,
    MatmulMeasurement,
    MatmulShape,
)

SQUARE_SIZES = (256, 512, 1024, 2048, 4096, 8192, 16384)
SKINNY_ROWS = 16  # a decode step of 16 sequences: weight streaming dominates
SKINNY_WIDTHS = (1024, 2048, 4096, 8192, 16384)
BANDWIDTH_BUFFERS = tuple(16 << 20 << (2 * i) for i in range(6))  # 16 MiB ... 16 GiB (x4)
MIN_CREDIBLE_BUFFER = 64 << 20  # smaller copies may run from the last-level cache of a CPU (see Ceilings)
# 64 KiB: a latency-bound message (alpha); the largest two: bandwidth-bound (beta) (calibration.reference.fit_allreduce).
ALLREDUCE_MESSAGES = (64 << 10, 1 << 20, 16 << 20, 128 << 20, 512 << 20)


MATMUL_SHAPES: tuple[MatmulShape, ...] = ("square", "skinny")


def _shapes(kind: MatmulShape) -> list[tuple[int, int, int]]:
    if kind == "square":
        return [(n, n, n) for n in SQUARE_SIZES]
    return [(SKINNY_ROWS, n, n) for n in SKINNY_WIDTHS]


def _matmul_fn(ctx: ProfileContext, dtype: str, m: int, n: int, k: int):
    torch = ctx.backend.torch
    device = ctx.backend.tensor_device
    if dtype == "fp8":
        # torch._scaled_mm: A row-major, B column-major, per-tensor scales, bf16 output (Hopper/Ada fp8 GEMM).
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()
        scale = torch.ones((), device=device, dtype=torch.float32)

        def run():
            return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)

        return run, (a, b)
    dt = ctx.backend.dtype(dtype)
    a = torch.randn(m, k, device=device, dtype=dt)
    b = torch.randn(k, n, device=device, dtype=dt)
    out = torch.empty(m, n, device=device, dtype=dt)

    def run():
        return torch.matmul(a, b, out=out)

    return run, (a, b, out)


def matmul_ceilings(
    ctx: ProfileContext, dtypes: list[str], budget_seconds: float, skipped: dict[str, str]
) -> list[MatmulMeasurement]:
    """Measure each dtype at square and skinny shapes, largest size that fits its slice of the budget."""
    results: list[MatmulMeasurement] = []
    jobs: list[tuple[str, MatmulShape]] = [(dtype, kind) for dtype in dtypes for kind in MATMUL_SHAPES]
    for index, (dtype, kind) in enumerate(jobs):
        ctx.progress(index / max(len(jobs), 1), f"matmul {dtype} {kind}")
        slice_end = time.perf_counter() + budget_seconds / len(jobs)
        previous: MatmulMeasurement | None = None
        for m, n, k in _shapes(kind):
            left = slice_end - time.perf_counter()
            need = (m * k + k * n + m * n) * BYTES_PER_ELEMENT[dtype] * (3 if dtype == "fp8" else 1)
            if need > ctx.memory_cap_bytes:
                break
            if previous is not None:
                predicted = previous.seconds * (2.0 * m * n * k) / previous.flops
                if predicted * 4 > left:  # warm-up + at least 3 timed calls
                    break
            ctx.check_cancel()
            try:
                fn, keep = _matmul_fn(ctx, dtype, m, n, k)
                timing = ctx.measure(fn, max(left / 2, 1e-3), min_reps=3)
            except Exception as exc:
                if ctx.backend.is_oom(exc):
                    ctx.notes.append(f"matmul {dtype} {kind}: stopped at {m}x{n}x{k} (out of memory)")
                    ctx.backend.empty_cache()
                    break
                skipped[f"matmul_{dtype}"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                break
            finally:
                fn = keep = None  # free the operands before the next size
            del keep
            previous = MatmulMeasurement(
                dtype=dtype, shape=kind, m=m, n=n, k=k, seconds=timing.best_seconds, reps=timing.reps
            )
            results.append(previous)
        ctx.backend.empty_cache()
    return results


def bandwidth_ceiling(ctx: ProfileContext, budget_seconds: float, max_buffer_bytes: int) -> list[BandwidthMeasurement]:
    """dst.copy_(src) on growing buffers: each copy reads and writes the buffer (2 x bytes moved)."""
    torch = ctx.backend.torch
    device = ctx.backend.tensor_device
    results: list[BandwidthMeasurement] = []
    end = time.perf_counter() + budget_seconds
    limit = min(max_buffer_bytes, ctx.memory_cap_bytes // 2)
    for size in BANDWIDTH_BUFFERS:
        if size > limit and results:
            break
        size = min(size, max(limit, 1 << 20))
        left = end - time.perf_counter()
        if results:
            last = results[-1]
            if last.seconds * size / last.buffer_bytes * 4 > left:
                break
        ctx.check_cancel()
        try:
            src = torch.ones(size // 4, dtype=torch.float32, device=device)
            dst = torch.zeros_like(src)  # touched now, so no timed copy pays first-touch page faults
            timing = ctx.measure(lambda dst=dst, src=src: dst.copy_(src), max(left / 2, 1e-3), min_reps=3)
        except Exception as exc:
            if ctx.backend.is_oom(exc):
                ctx.notes.append(f"bandwidth: stopped at {size >> 20} MiB (out of memory)")
                ctx.backend.empty_cache()
                break
            raise
        finally:
            src = dst = None
        results.append(BandwidthMeasurement(buffer_bytes=size, seconds=timing.best_seconds, reps=timing.reps))
        if size >= limit:
            break
    if results and results[-1].buffer_bytes < MIN_CREDIBLE_BUFFER:
        ctx.notes.append(
            f"bandwidth measured on {results[-1].buffer_bytes >> 20} MiB buffers only (budget or "
            "memory cap); caches may inflate it"
        )
    ctx.backend.empty_cache()
    return results


# ---------------------------------------------------------------------------------------------
# all-reduce across processes (NCCL on GPUs; gloo on CPUs for tests)


def allreduce_bus_bandwidth(
    world_size: int,
    message_sizes: list[int],
    *,
    backend: str = "nccl",
    device: str = "cuda",
    seconds_per_size: float = 0.5,
    timeout_seconds: float = 120.0,
) -> list[AllReduceMeasurement]:
    """Start one process per rank (`python -m planner.calibration.microbench`, like torchrun: a fresh
    interpreter, so nothing of the caller's __main__ is re-imported), all-reduce each message size, and
    return rank 0's timings (the slowest rank's time per all-reduce, after a barrier). Raises RuntimeError
    with the failing rank's message when a worker fails or the group does not finish in time."""
    package_root = str(Path(__file__).resolve().parents[2])  # the folder that holds planner/
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="headroom-allreduce-") as tmp:
        init = Path(tmp, "rendezvous").as_uri()
        procs = []
        for rank in range(world_size):
            spec = json.dumps(
                {
                    "rank": rank,
                    "world_size": world_size,
                    "backend": backend,
                    "device": device,
                    "init": init,
                    "sizes": list(message_sizes),
                    "seconds_per_size": seconds_per_size,
                    "out_dir": tmp,
                }
            )
            log = open(Path(tmp, f"stderr-{rank}.txt"), "w")
            procs.append(
                (
                    subprocess.Popen(
                        [sys.executable, "-m", "planner.calibration.microbench", spec],
                        stdout=subprocess.DEVNULL,
                        stderr=log,
                        env=env,
                    ),
                    log,
                )
            )
        deadline = time.monotonic() + timeout_seconds
        stuck = []
        for rank, (proc, _log) in enumerate(procs):
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                stuck.append(rank)
        for rank in stuck:
            procs[rank][0].kill()
            procs[rank][0].wait(10)
        for _, log in procs:
            log.close()
        errors = []
        for rank in range(world_size):
            error_file = Path(tmp, f"error-{rank}.txt")
            if error_file.exists():
                errors.append(f"rank {rank}: {error_file.read_text().strip()}")
        if errors:
            raise RuntimeError("all-reduce failed: " + "; ".join(errors))
        if stuck:
            raise RuntimeError(f"all-reduce did not finish within {timeout_seconds:.0f} s (ranks {stuck} stuck)")
        failed = [rank for rank, (proc, _) in enumerate(procs) if proc.returncode != 0]
        if failed:
            tail = Path(tmp, f"stderr-{failed[0]}.txt").read_text().strip().splitlines()[-1:]
            raise RuntimeError(f"all-reduce worker(s) {failed} exited with an error: {' '.join(tail)}")
        data = json.loads(Path(tmp, "result.json").read_text())
    return [
        AllReduceMeasurement(
            backend=backend, world_size=world_size, message_bytes=row["bytes"], seconds=row["seconds"], reps=row["reps"]
        )
        for row in data
    ]


def _allreduce_worker(
    rank: int,
    world_size: int,
    backend: str,
    device: str,
    init: str,
    sizes: list[int],
    seconds_per_size: float,
    out_dir: str,
) -> None:
    try:
        import torch
        import torch.distributed as dist

        if device == "cuda":
            torch.cuda.set_device(rank)
            dev = torch.device("cuda", rank)
            sync = torch.cuda.synchronize
        else:
            dev = torch.device("cpu")

            def sync():
                return None

        dist.init_process_group(
            backend, init_method=init, rank=rank, world_size=world_size, timeout=timedelta(seconds=60)
        )
        rows = []
        for size in sizes:
            x = torch.ones(max(size // 4, 1), dtype=torch.float32, device=dev)
            dist.all_reduce(x)
            sync()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            sync()
            once = time.perf_counter() - t0
            reps = torch.tensor([max(1, min(200, int(seconds_per_size / max(once, 1e-6))))], device=dev)
            dist.broadcast(reps, 0)  # every rank must run the same number of collectives
            count = int(reps.item())
            dist.barrier()
            sync()
            t0 = time.perf_counter()
            for _ in range(count):
                dist.all_reduce(x)
            sync()
            elapsed = torch.tensor([(time.perf_counter() - t0) / count], dtype=torch.float64, device=dev)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            rows.append({"bytes": x.numel() * 4, "seconds": float(elapsed.item()), "reps": count})
            del x
        if rank == 0:
            tmp = Path(out_dir, "result.json.tmp")
            tmp.write_text(json.dumps(rows))
            os.replace(tmp, Path(out_dir, "result.json"))
        dist.destroy_process_group()
    except BaseException as exc:
        Path(out_dir, f"error-{rank}.txt").write_text(f"{type(exc).__name__}: {exc}")
        raise SystemExit(1) from None


__all__ = ["ALLREDUCE_MESSAGES", "allreduce_bus_bandwidth", "bandwidth_ceiling", "matmul_ceilings"]


if __name__ == "__main__":  # one all-reduce rank, started by allreduce_bus_bandwidth
    _spec = json.loads(sys.argv[1])
    _allreduce_worker(
        _spec["rank"],
        _spec["world_size"],
        _spec["backend"],
        _spec["device"],
        _spec["init"],
        _spec["sizes"],
        _spec["seconds_per_size"],
        _spec["out_dir"],
    )
