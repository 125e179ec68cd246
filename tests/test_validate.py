"""Build-time validation: each broken master fails with a message that names file:line.

Each case starts from a fresh scaffold (`coursekit new`) in a temporary folder and breaks one thing.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from coursekit import build, scaffold, validate

QUESTION_FILE = "notebook/01_q1_example.py"


@pytest.fixture
def scaffolded(tmp_path) -> Path:
    return scaffold.new_assignment("demo", root=tmp_path)


def _edit(folder: Path, relative: str, old: str, new: str) -> Path:
    path = folder / relative
    text = path.read_text()
    assert old in text, f"the scaffold changed: {old!r} is not in {relative}"
    path.write_text(text.replace(old, new, 1))
    return path


def _problems(folder: Path) -> list[str]:
    with pytest.raises(validate.ValidationError) as info:
        validate.validate(build.Assignment("demo", root=folder.parents[1]))
    return info.value.problems


def _line_of(path: Path, fragment: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if fragment in line)


def test_the_scaffold_and_every_assignment_validate(scaffolded):
    assert [q.name for q in validate.validate(build.Assignment("demo", root=scaffolded.parents[1]))] == ["q1"]
    for name in build.assignment_names():
        validate.validate(build.Assignment(name))


def test_header_points_must_equal_the_tests_points(scaffolded):
    path = _edit(scaffolded, QUESTION_FILE, "# points: 2", "# points: 3")
    [problem] = _problems(scaffolded)
    assert problem.startswith(f"{path}:{_line_of(path, '# points: 3')}: ")
    assert "`points: 3` in its header but its tests carry 2" in problem


def test_a_test_without_points_is_named(scaffolded):
    path = _edit(scaffolded, QUESTION_FILE, "hidden: true\npoints: 2\n", "hidden: true\n")
    problems = _problems(scaffolded)
    assert any(p.startswith(f"{path}:") and "has no `points` in its TEST CONFIG" in p for p in problems)


def test_unknown_header_and_test_keys_are_rejected(scaffolded):
    path = _edit(scaffolded, QUESTION_FILE, "# points: 2\n", "# points: 2\n# pionts: 2\n")
    _edit(scaffolded, QUESTION_FILE, "hidden: true\n", "hidden: true\nhiden: true\n")
    problems = _problems(scaffolded)
    assert f"{path}:{_line_of(path, '# pionts')}: unknown question key 'pionts'" in "\n".join(problems)
    assert f"{path}:{_line_of(path, 'hiden: true')}: unknown test key 'hiden'" in "\n".join(problems)


def test_question_name_must_match_its_file(scaffolded):
    path = _edit(scaffolded, QUESTION_FILE, "# name: q1", "# name: q2")
    problems = _problems(scaffolded)
    assert any(re.match(rf"{re.escape(str(path))}:1: question 'q2' is in 01_q1_example.py", p) for p in problems)


def test_hidden_tests_call_their_own_checks_module(scaffolded):
    path = _edit(scaffolded, QUESTION_FILE, "from demo_checks import q1\n    q1.", "from demo_checks import q2\n    q2.")
    problems = _problems(scaffolded)
    assert any(p.startswith(f"{path}:") and "uses demo_checks.q2; it should use demo_checks.q1" in p for p in problems)


def test_a_missing_checks_module_is_named(scaffolded):
    (scaffolded / "checks" / "demo_checks" / "q1.py").unlink()
    assert any("has no checks module" in p and p.endswith("q1.py") for p in _problems(scaffolded))


def test_every_question_needs_a_hidden_test(scaffolded):
    path = _edit(scaffolded, QUESTION_FILE, "hidden: true\npoints: 2\n", "points: 0\n")
    _edit(scaffolded, QUESTION_FILE, "# points: 2", "# points: 0")
    problems = _problems(scaffolded)
    assert problems == [f"{path}:1: question 'q1' has no hidden test (`hidden: true` in a TEST CONFIG)"]


@pytest.mark.parametrize("kind,marker", [("misconception", "Variant(\"M1\""), ("correct alternative", "Variant(\"mse-loss\"")])
def test_the_catalogue_needs_one_entry_of_each_kind(scaffolded, kind, marker):
    catalogue = scaffolded / "misconceptions" / "q1.py"
    text = catalogue.read_text()
    start = text.index(marker)
    end = text.index("'''),", start) + len("'''),")
    catalogue.write_text(text[:start] + text[end:])
    [problem] = _problems(scaffolded)
    assert problem.startswith(f"{catalogue}:1: no {kind}")


def test_an_assignment_without_files_folder_builds_and_otter_errors_name_file_and_question(scaffolded, tmp_path):
    """The scaffold has no files/; an unclosed solution block passes validation and fails in otter."""
    assert not (scaffolded / "files").exists()
    path = _edit(scaffolded, QUESTION_FILE, "# %% [raw]\n# # END SOLUTION\n\n", "")
    with pytest.raises(build.BuildError) as info:
        build.build(build.Assignment("demo", root=scaffolded.parents[1]), out_root=tmp_path / "out",
                    execute_solutions=False, log=lambda *_: None)
    first_line = str(info.value).splitlines()[0]
    assert first_line.startswith(f"{path}:{_line_of(path, '# # BEGIN TESTS') - 1}: otter assign fails on question q1: ")
