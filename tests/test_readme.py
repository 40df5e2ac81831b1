"""The README is a short front door: at most 150 lines, its two commands as .ci/run and the install
script run them, and every docs/ page it links exists."""
import re

README_MAX_LINES = 150


def test_the_readme_is_short(root):
    lines = (root / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference into docs/"


def test_the_readme_test_command_is_what_ci_runs(root):
    readme = (root / "README.md").read_text()
    ci = (root / ".ci/run").read_text().strip().splitlines()[-1]
    assert ci in readme, ci
    assert "bash scripts/install.sh && source .venv/bin/activate && dvc repro" in readme


def test_every_linked_doc_exists(root):
    readme = (root / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links, "the README links no docs/ page"
    missing = [link for link in links if not (root / link).exists()]
    assert not missing, missing
