"""Stage check: validate params.yaml and every file it names, before DVC touches any output.

    python -m pipeline.stages.check

Every other stage depends on this one, so DVC runs it first whenever params.yaml, the data or the
validation code changed. DVC removes a stage's outputs just before running that stage: a bad edit
therefore stops here, with one line naming the key, and nothing computed is lost. Its output is a
constant marker kept across runs (persist), so a successful check never re-runs anything after it.

It also copies each tier's recipe to artifacts/recipes/<tier>.yaml (a published checkpoint: its
reference and fingerprint; a constant marker for a tier without either): the quantize and kvscales stages of a tier depend on that copy alone, so editing one
recipe re-runs that tier's stages and what follows them, not every tier's.
"""
from __future__ import annotations

from pathlib import Path

from pipeline import config, io, paths, schema
from pipeline.quant import published
from pipeline.stages import runner

MARKER_TEXT = "params.yaml passed python -m pipeline.config\n"
NO_RECIPE = b"# no recipe: this tier's method takes none\n"


def tier_spec(tier: schema.Tier, root: Path) -> bytes:
    """What quantize@<model>-<tier> depends on besides the source: the recipe byte for byte; for a
    published checkpoint its reference and, for a local folder, its fingerprint (as of this check:
    a folder changed in place with params.yaml unchanged needs `dvc repro -f check`); else the marker."""
    if tier.recipe:
        return (root / tier.recipe).read_bytes()
    if tier.method == "published":
        head = f"# published checkpoint {tier.checkpoint}" + (f"@{tier.revision}" if tier.revision else "") + "\n"
        kind, _, name = tier.checkpoint.partition(":")
        return (head + (published.fingerprint(root / name) if kind == "local" else "")).encode()
    if tier.method == "endpoint":       # the server's answers are evaluate's to measure; its address is the spec
        return f"# endpoint {tier.served_model} at {tier.base_url}\n".encode()
    if tier.method == "gguf":           # what quantize makes or serves: the type, or the file named
        return f"# gguf {tier.gguf_type or tier.gguf_file}\n".encode()
    return NO_RECIPE


def write_recipes(params: schema.Params, root: Path = Path(".")) -> None:
    """artifacts/recipes/: each current tier's spec (tier_spec); nothing else."""
    with io.AtomicDir(root / paths.RECIPES) as tmp:
        for name, tier in params.tiers.items():
            (tmp / paths.tier_recipe(name).name).write_bytes(tier_spec(tier, root))


@runner.stage_main("check", loader=config.load_or_exit, offline=False)
def main(st: runner.Stage) -> None:
    params = st.params
    if not paths.CHECKED.is_file() or paths.CHECKED.read_text() != MARKER_TEXT:
        io.atomic_write_text(paths.CHECKED, MARKER_TEXT)
    write_recipes(params)


if __name__ == "__main__":
    main()
