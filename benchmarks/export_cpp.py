"""Compile the C++ program of docs/EXPORT.md and check that it acts as ``agent.predict`` on CartPole.

    .venv/bin/python benchmarks/export_cpp.py HEADERS [--observations N] [--library FILE]

HEADERS is a folder with onnxruntime's C++ headers (``onnxruntime_cxx_api.h`` and what it includes: the
``include/`` folder of an onnxruntime release). The Python wheel ships the library but not the headers, so
without HEADERS the script says so and exits 0 having checked nothing. The headers' ``ORT_API_VERSION`` must
be at most the library's own API version (a library accepts the headers of its version and of every earlier
one).

The program compiled is the ```cpp block of docs/EXPORT.md's "Running it from C++", read from that file, so
what is checked is exactly what the page shows. The script trains a small CartPole agent (``--norm-obs``, so
the normalization inside the file is exercised), runs ``proxima export RUN --format onnx``, compiles the
program with g++ against the installed wheel's ``libonnxruntime.so`` (or ``--library``), feeds it N
observations of the env (played by a random policy from seed 0), and compares each printed action with
``agent.predict(obs, deterministic=True)``. Prints the versions, the compile command, and the count of equal
actions; exits 1 on any difference or a failed compile.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from export_latency import observations  # the same env observations as the latency benchmark

import proxima

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "EXPORT.md")
SECTION = "## Running it from C++"


def snippet() -> str:
    """The first ```cpp block after the C++ section's title in docs/EXPORT.md."""
    text = open(DOC, encoding="utf-8").read()
    found = re.search(r"```cpp\n(.*?)```", text[text.index(SECTION) :], re.S)
    if found is None:
        sys.exit(f"no ```cpp block under {SECTION!r} in {DOC}")
    return found.group(1)


def wheel_library() -> str:
    import onnxruntime

    capi = os.path.join(os.path.dirname(onnxruntime.__file__), "capi")
    found = sorted(glob.glob(os.path.join(capi, "libonnxruntime.so*")))
    if not found:
        sys.exit(f"no libonnxruntime.so* in {capi}: give --library")
    return found[0]


def api_version(headers: str) -> int:
    text = open(os.path.join(headers, "onnxruntime_c_api.h"), encoding="utf-8").read()
    return int(re.search(r"#define ORT_API_VERSION (\d+)", text).group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "headers", nargs="?", help="folder with onnxruntime_cxx_api.h and the headers it includes"
    )
    parser.add_argument("--observations", type=int, default=500)
    parser.add_argument("--library", help="libonnxruntime.so to link (default: the installed wheel's)")
    args = parser.parse_args()
    if not args.headers or not os.path.isfile(os.path.join(args.headers, "onnxruntime_cxx_api.h")):
        print("skipped: give a folder with onnxruntime's C++ headers (onnxruntime_cxx_api.h and what it includes,"
              " the include/ folder of an onnxruntime release); the Python wheel has none")  # fmt: skip
        return 0
    compiler = shutil.which("g++")
    if compiler is None:
        print("skipped: no g++ on the PATH")
        return 0
    import onnxruntime

    library = os.path.abspath(args.library or wheel_library())
    work = tempfile.mkdtemp(prefix="export-cpp-")
    run_dir = os.path.join(work, "cartpole")
    agent = proxima.train(env_id="CartPole-v1", total_timesteps=4096, norm_obs=True, seed=1, run_dir=run_dir,
                          quiet=True, plot=False, report=False)  # fmt: skip
    proxima_cli = os.path.join(os.path.dirname(sys.executable), "proxima")
    subprocess.run([proxima_cli, "export", run_dir, "--format", "onnx"], check=True)
    source = os.path.join(work, "policy.cpp")
    with open(source, "w", encoding="utf-8") as f:
        f.write(snippet())
    # A release's lib/ holds libonnxruntime.so (for -l) and libonnxruntime.so.1 (the library's soname, for the
    # loader) as links to the versioned file; the wheel holds only that file, so make the two links.
    lib = os.path.join(work, "lib")
    os.makedirs(lib)
    for name in ("libonnxruntime.so", "libonnxruntime.so.1"):
        os.symlink(library, os.path.join(lib, name))
    program = os.path.join(work, "policy")
    command = [compiler, "-std=c++17", "-O2", source, "-I", os.path.abspath(args.headers), "-L", lib,
               "-lonnxruntime", f"-Wl,-rpath,{lib}", "-o", program]  # fmt: skip
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(
        f"onnxruntime {onnxruntime.__version__} ({library}), headers' ORT_API_VERSION {api_version(args.headers)}"
    )
    print(f"{version}\n{' '.join(command)}")
    compiled = subprocess.run(command, capture_output=True, text=True)
    if compiled.returncode != 0:
        print(compiled.stderr)
        return 1
    obs = observations(args.observations)
    # 9 significant digits give back the same float32 when the program parses them.
    lines = "".join(" ".join(f"{x:.9g}" for x in o.tolist()) + "\n" for o in obs)
    ran = subprocess.run(
        [program, os.path.join(run_dir, "policy.onnx")], input=lines, capture_output=True, text=True
    )
    if ran.returncode != 0:
        print(ran.stderr)
        return 1
    got = np.array([int(a) for a in ran.stdout.split()])
    want = np.array([int(agent.predict(o, deterministic=True)) for o in obs])
    equal = int((got == want).sum()) if got.shape == want.shape else 0
    print(f"{equal} of {len(want)} actions equal to agent.predict(obs, deterministic=True)"
          f" (actions: {np.bincount(want, minlength=2).tolist()} of 0 and 1)")  # fmt: skip
    shutil.rmtree(work)
    return 0 if equal == len(want) else 1


if __name__ == "__main__":
    sys.exit(main())
