#!/usr/bin/python3
"""The C++ library as a program outside murmur takes it: `cmake --install build --prefix P`,
then examples/cpp built against P alone (find_package(murmur CONFIG), murmur::murmur; no path
into murmur's source tree on its compile lines), then run by murmur-launch as 2 peers: both
train the example's own model (softmax regression on Fashion-MNIST) and the run's summary.json
has the average model above 80% and both peers. libmurmur.so exports murmur's API and errors
alone (no spdlog, fmt or yaml-cpp symbol to clash with a program's own).
Skipped (77) without Debian's dataset-fashion-mnist. Python standard library only.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "runtime"))
from launch_util import Checks, excerpt  # noqa: E402

check = Checks("install_test")
DATA = "/usr/share/datasets/fashion-mnist"


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)
    return p.returncode, p.stdout + p.stderr


def main():
    build = sys.argv[sys.argv.index("--build") + 1]
    peer = os.path.join(build, "bin", "murmur-peer")
    if not os.path.isdir(DATA):
        check.skip(f"no {DATA} (dataset-fashion-mnist)")
    with tempfile.TemporaryDirectory(prefix="murmur-install-") as d:
        prefix, example = os.path.join(d, "prefix"), os.path.join(d, "example")
        rc, text = run(["cmake", "--install", build, "--prefix", prefix])
        if not check(rc == 0, f"cmake --install: exit {rc}:\n{text[-3000:]}"):
            return check.result()
        for f in ("include/murmur/murmur.h", "include/murmur/core/error.h", "lib/cmake/murmur/murmurConfig.cmake"):
            check(os.path.exists(os.path.join(prefix, f)), f"not installed: {f}")
        lib = os.path.join(prefix, "lib", "libmurmur.so")
        rc, text = run(["nm", "-D", "--defined-only", "-C", lib])
        foreign = [line for line in text.splitlines() if re.search(r"spdlog|fmt::|YAML::|nlohmann|CLI::", line)]
        check(rc == 0 and not foreign, f"libmurmur.so exports others' symbols: {foreign[:5]}")
        check(" murmur::Communicator::after_step" in text, "libmurmur.so does not export murmur::Communicator")

        rc, text = run(["cmake", "-S", os.path.join(ROOT, "examples", "cpp"), "-B", example, "-G", "Ninja",
                        f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
        if check(rc == 0, f"configuring examples/cpp against {prefix}: exit {rc}:\n{text[-3000:]}"):
            rc, text = run(["cmake", "--build", example])
            check(rc == 0, f"building examples/cpp: exit {rc}:\n{text[-3000:]}")
        try:
            with open(os.path.join(example, "compile_commands.json")) as f:
                commands = " ".join(c["command"] for c in json.load(f))
        except (OSError, ValueError):
            commands = ""
        includes = re.findall(r"(?:-I|-isystem )\s*(\S+)", commands)
        check(includes and all(i.startswith(prefix) for i in includes),
              f"examples/cpp was compiled with include paths {includes}, not {prefix}'s alone")
        binary = os.path.join(example, "softmax_fashion")
        if not check(os.path.exists(binary), "no examples/cpp binary"):
            return check.result()
        rc, text = run(["ldd", binary])
        check(os.path.join(prefix, "lib") in text, f"the example does not load the installed libmurmur:\n{text}")

        out = os.path.join(d, "run")
        rc, text = run([os.path.join(ROOT, "tools", "murmur-launch"), "-n", "2", "--config",
                        os.path.join(ROOT, "configs", "ring.yaml"), "--peer", peer, "--out", out,
                        "--", binary, "--epochs", "2"], timeout=400)
        try:
            with open(os.path.join(out, "summary.json")) as f:
                s = json.load(f)
        except (OSError, ValueError):
            s = {}
        avg = s.get("average_model", {}).get("test_accuracy")
        check(rc == 0 and avg is not None and avg > 0.8 and len(s.get("peers", [])) == 2,
              f"the example under murmur-launch: exit {rc}, average model {avg}:\n{excerpt(text)}")
        print(f"install_test: examples/cpp, 2 peers, 2 epochs: average model {avg}, "
              f"consensus distance {s.get('consensus_distance')}")
    return check.result()


if __name__ == "__main__":
    sys.exit(main())
