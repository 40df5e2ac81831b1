"""One recipe file per tier as its DVC dep: the check stage copies each tier's recipe to
artifacts/recipes/<tier>.yaml (a constant marker for a tier without one), and quantize/kvscales of a
tier depend on that copy alone, so editing one recipe re-runs that tier only. Fast: no model."""
from __future__ import annotations

import shutil

from pipeline import paths, schema
from pipeline.stages import check


def copies(root) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / paths.RECIPES).iterdir())}


def test_each_tier_gets_its_recipe_or_the_marker(tmp_path, root):
    shutil.copytree(root / "recipes", tmp_path / "recipes")
    params = schema.load(root / "params.yaml")
    (tmp_path / paths.RECIPES).mkdir(parents=True)
    (tmp_path / paths.tier_recipe("removed-tier")).write_text("stale\n")
    check.write_recipes(params, tmp_path)
    found = copies(tmp_path)
    assert set(found) == {paths.tier_recipe(t).name for t in params.tiers}      # the stale copy is gone
    for name, tier in params.tiers.items():
        expected = (root / tier.recipe).read_bytes() if tier.recipe else check.NO_RECIPE
        assert found[paths.tier_recipe(name).name] == expected, name


def test_editing_one_recipe_changes_only_its_tiers_copy(tmp_path, root):
    shutil.copytree(root / "recipes", tmp_path / "recipes")
    params = schema.load(root / "params.yaml")
    check.write_recipes(params, tmp_path)
    before = copies(tmp_path)
    edited = params.tiers["int4-gptq"].recipe
    with open(tmp_path / edited, "a", encoding="utf-8") as f:
        f.write("# a comment\n")
    check.write_recipes(params, tmp_path)
    after = copies(tmp_path)
    changed = {n for n in before if before[n] != after[n]}
    sharing = {paths.tier_recipe(t).name for t, tier in params.tiers.items() if tier.recipe == edited}
    assert changed == sharing == {"int4-gptq.yaml"}
