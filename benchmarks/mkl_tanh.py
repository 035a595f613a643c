"""Which of MKL's tanh kernels `torch.tanh` runs on this CPU, and what the others would cost and change.

    .venv/bin/python benchmarks/mkl_tanh.py [--exhaustive KERNEL ...]

On a CPU, torch computes float32 tanh with MKL's vector math (VML), whose kernels come in one version per
instruction set (in MKL's names: EX and E2 generic, L9 AVX2, Z0 AVX-512), each in high-accuracy (HA), low-accuracy
(LA) and enhanced-performance (EP) modes. MKL picks the kernel by CPU, and on a CPU it does not take for Intel's
(`mkl_serv_intel_cpu_true()` returns 0) it takes a generic one whatever the CPU's instruction sets: that is why
tanh costs 10× a sigmoid on the AMD EPYC of these machines (benchmarks/activation_cost.py).

For each HA kernel that libtorch_cpu.so exports, this prints its rate on one thread (G floats/s, 1M floats, best
of 5) and how many of 1M normal floats (std 3) it rounds otherwise than `torch.tanh`. ``--exhaustive KERNEL``
compares KERNEL with `torch.tanh` on every one of the 2^32 float32 bit patterns (NaNs, infinities and
subnormals included), bit for bit: about two minutes for a kernel.

This is a measurement, not a part of proxima: it calls MKL's internal kernels by their symbols (with the
signature ``(int64 n, const float *x, float *y)``, read from their behaviour, not from a header), which only a
build of torch with MKL linked in exports, under names that may change with MKL.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import time

import torch

KERNELS = ["EX", "E2", "L9", "Z0"]  # generic, generic, AVX2, AVX-512 (MKL's names)


def libtorch() -> ctypes.CDLL:
    return ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))


def kernel(lib: ctypes.CDLL, name: str):
    """MKL's float32 high-accuracy tanh kernel ``name`` (EX, L9, ...) as ``f(x) -> y``, or None if not exported."""
    try:
        raw = getattr(lib, f"mkl_vml_kernel_sTanh_{name}HAynn")
    except AttributeError:
        return None
    raw.restype, raw.argtypes = None, [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]

    def tanh(x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        raw(x.numel(), x.data_ptr(), y.data_ptr())
        return y

    return tanh


def rate(fn, x: torch.Tensor, repeats: int = 5, calls: int = 20) -> float:
    """G floats a second, the best of ``repeats`` rounds of ``calls`` calls."""
    fn(x)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        best = min(best, (time.perf_counter() - start) / calls)
    return x.numel() / best / 1e9


def differing_bits(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((a.view(torch.int32) != b.view(torch.int32)).sum())


def exhaustive(fn, chunk: int = 1 << 24) -> int:
    """How many of the 2^32 float32 bit patterns ``fn`` maps otherwise than torch.tanh, bit for bit."""
    differ = 0
    low = torch.arange(chunk, dtype=torch.int64)
    for start in range(0, 1 << 32, chunk):
        patterns = start + low
        x = (
            torch.where(patterns >= 1 << 31, patterns - (1 << 32), patterns)
            .to(torch.int32)
            .view(torch.float32)
        )
        differ += differing_bits(fn(x), torch.tanh(x))
    return differ


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(
            line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")
        )
    except (OSError, StopIteration):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exhaustive", nargs="*", default=[], choices=KERNELS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    lib = libtorch()
    intel = lib.mkl_serv_intel_cpu_true() if hasattr(lib, "mkl_serv_intel_cpu_true") else "not exported"
    print(f"torch {torch.__version__}, CPU {cpu_model()}, torch's capability {torch.backends.cpu.get_cpu_capability()}, "
          f"MKL takes it for Intel's: {intel}")  # fmt: skip
    x = torch.randn(1 << 20, generator=torch.Generator().manual_seed(0)) * 3
    reference = torch.tanh(x)
    print("| kernel | G floats/s, 1 thread | differs from torch.tanh (of 1M) |")
    print("|---|---|---|")
    print(f"| torch.tanh | {rate(torch.tanh, x):.2f} | |")
    for name in KERNELS:
        fn = kernel(lib, name)
        if fn is None:
            print(f"| {name}HA | not exported | |")
            continue
        print(f"| {name}HA | {rate(fn, x):.2f} | {differing_bits(fn(x), reference):,} |", flush=True)
    for name in args.exhaustive:
        fn = kernel(lib, name)
        if fn is not None:
            print(
                f"{name}HA against torch.tanh, every float32: {exhaustive(fn):,} of 2^32 differ", flush=True
            )


if __name__ == "__main__":
    main()
