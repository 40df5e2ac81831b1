"""The folder of wheels the GPU check brings to an air-gapped GPU host (scripts/gpu_check_offline.sh).

    # on the GPU host: what it already has (torch with CUDA and transformers, at least)
    python -m pip list --format=freeze > host.txt
    # on a machine with PyPI and this repository's .venv (bash scripts/install.sh):
    .venv/bin/python -m scripts.gpu_wheels --have host.txt --dest gpu-wheels     # --python-version 3.11
    # carry gpu-wheels/ and a clone of this repository to the host; there:
    bash scripts/gpu_check_offline.sh gpu-wheels

What the reference path needs beyond torch and transformers is read from this .venv's installed
metadata (the versions the pipeline is tested with): the closure of REFERENCE's requirements, less
what torch and transformers already bring and less what the host lists. Each is downloaded as a wheel
for the host's Python and platform (a package published only as source is built into one here). The
folder must fit `--limit-mib` (64): the script prints every wheel's size and exits 1 naming the largest
when it does not. Without `--have`, the host is assumed bare: torch, transformers and their own
requirements only.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

# What the reference backend's path imports: quantize (llm-compressor, datasets), the evaluation
# (lm-eval's task loading, sacrebleu, rouge-score, scipy's t quantiles), the GGUF reader. Not dvc
# (the offline check calls the stages itself), matplotlib (no decide), bitsandbytes (its CUDA wheel
# alone is larger than the folder: its tiers run only where the host has it), vLLM.
REFERENCE = ("llmcompressor", "lm-eval", "sacrebleu", "rouge-score", "datasets", "accelerate", "gguf",
             "scipy", "pyyaml")
HOST = ("torch", "transformers")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(dist: str, extras: frozenset[str] = frozenset()) -> set[tuple[str, frozenset[str]]]:
    """(name, extras) of what `dist` installed with `extras` requires here (markers evaluated here)."""
    from packaging.requirements import Requirement
    out = set()
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
            out.add((canonical(req.name), frozenset(req.extras)))
    return out


def closure(roots: tuple[str, ...], requires=requirement_names, installed=None) -> set[str]:
    """Every distribution `roots` need (roots as `name` or `name[extra,...]`), themselves included, as
    far as this environment has them; a requirement's extras are followed too."""
    from packaging.requirements import Requirement
    installed = installed if installed is not None else {canonical(d.metadata["Name"]) for d in metadata.distributions()}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(canonical(r.name), frozenset(r.extras)) for r in map(Requirement, roots)]
    while todo:
        node = todo.pop()
        if node in seen or node[0] not in installed:
            continue
        seen.add(node)
        todo += sorted(requires(*node) - seen, key=str)
    return {name for name, _ in seen}


def needed(reference: set[str], host_bare: set[str], have: set[str]) -> list[str]:
    """What the folder must hold: the reference closure less the host's."""
    return sorted(reference - host_bare - have)


def have_file(path: Path) -> set[str]:
    """Names in a `pip list --format=freeze` / requirements-style file."""
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(canonical(re.split(r"[\s<>=!~@\[]", line, maxsplit=1)[0]))
    return names


def over_limit(sizes: dict[str, int], limit_mib: float) -> str | None:
    """None when the folder fits; else one line naming the largest wheels."""
    total = sum(sizes.values())
    if total <= limit_mib * 2**20:
        return None
    big = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    return (f"gpu_wheels: {total / 2**20:.1f} MiB is over --limit-mib {limit_mib:g}; largest: "
            + ", ".join(f"{n} {s / 2**20:.1f} MiB" for n, s in big) + " (a host that has them: list them in --have)")


def download(names: list[str], dest: Path, python_version: str, platform: str) -> None:
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    for name in names:
        pin = f"{name}=={metadata.version(name)}"
        got = subprocess.run(pip + ["download", "--no-deps", "--only-binary=:all:", "--python-version", python_version,
                                    "--platform", platform, "--platform", "any", "-d", str(dest), pin],
                             capture_output=True, text=True)
        if got.returncode == 0:
            continue
        # published as source only (pip's "no matching distribution" for a wheel): built into one here
        print(f"gpu_wheels: {pin}: no wheel on the index, building one from its source", file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(pip + ["download", "--no-deps", "--no-binary=:all:", "-d", tmp, pin], check=True)
            subprocess.run(pip + ["wheel", "--no-deps", "-w", str(dest), *map(str, Path(tmp).iterdir())], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--have", type=Path, help="the host's `pip list --format=freeze`")
    ap.add_argument("--dest", type=Path, default=Path("gpu-wheels"))
    ap.add_argument("--python-version", default=f"{sys.version_info.major}.{sys.version_info.minor}")
    ap.add_argument("--platform", default="manylinux_2_28_x86_64")
    ap.add_argument("--limit-mib", type=float, default=64)
    ap.add_argument("--list", action="store_true", help="print what the folder would hold; download nothing")
    a = ap.parse_args(argv)
    if a.have is not None and not a.have.is_file():
        print(f"gpu_wheels: --have {a.have}: no such file", file=sys.stderr)
        return 2
    names = needed(closure(REFERENCE), closure(HOST), have_file(a.have) if a.have else set())
    if a.list:
        print("\n".join(f"{n}=={metadata.version(n)}" for n in names))
        return 0
    a.dest.mkdir(parents=True, exist_ok=True)
    download(names, a.dest, a.python_version, a.platform)
    sizes = {p.name: p.stat().st_size for p in sorted(a.dest.glob("*.whl"))}
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"{size / 2**20:8.2f} MiB  {name}")
    print(f"{sum(sizes.values()) / 2**20:8.2f} MiB  in {a.dest}/ ({len(sizes)} wheels; limit {a.limit_mib:g} MiB)")
    why = over_limit(sizes, a.limit_mib)
    if why:
        print(why, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
