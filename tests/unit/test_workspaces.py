"""``resolve_workspace`` against a real directory tree with symlinks, built in tmp_path."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.schemas import WORKSPACE_PATTERN
from app.errors import WorkspaceRejected
from app.process.workspaces import lexical_problem, resolve_workspace

OUTSIDE = "outside every configured root"
MISSING = "not an existing directory"
DOTDOT = "'..' segments"
RELATIVE = "absolute path"
NUL = "NUL byte"


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """Two roots, a sibling whose name extends the first, and links in and out of it.

    ::

        root/                 project/nested/deep/  file.txt  %2e%2e-named/
             link-in  -> root/project        link-out -> outside/
             dangling -> nowhere/            loop     -> loop
        root-evil/project/
        other-root/work/
        outside/
    """
    base = Path(os.path.realpath(tmp_path))
    root, other = base / "root", base / "other-root"
    for directory in (
        root / "project" / "nested" / "deep",
        root / "%2e%2e-named",
        base / "root-evil" / "project",
        other / "work",
        base / "outside",
    ):
        directory.mkdir(parents=True)
    (root / "file.txt").write_text("")
    (root / "link-in").symlink_to(root / "project")
    (root / "link-out").symlink_to(base / "outside")
    (root / "dangling").symlink_to(base / "nowhere")
    (root / "loop").symlink_to(root / "loop")
    return {"base": base, "root": root, "other": other}


ACCEPTED = [
    pytest.param("{root}", "{root}", id="the-root-itself"),
    pytest.param("{root}/project", "{root}/project", id="inside"),
    pytest.param("{root}/project/nested/deep", "{root}/project/nested/deep", id="nested"),
    pytest.param("{root}//project/./nested/", "{root}/project/nested", id="redundant-separators"),
    pytest.param("{root}/link-in", "{root}/project", id="symlink-pointing-inside"),
    pytest.param("{root}/link-in/nested", "{root}/project/nested", id="through-a-symlink"),
    pytest.param("{root}/%2e%2e-named", "{root}/%2e%2e-named", id="percent-encoding-is-literal"),
    pytest.param("{other}/work", "{other}/work", id="second-root"),
]

REFUSED = [
    pytest.param("{root}/project/../project", DOTDOT, id="dotdot-back-inside"),
    pytest.param("{root}/../outside", DOTDOT, id="dotdot-out"),
    pytest.param("{root}/..", DOTDOT, id="dotdot-trailing"),
    pytest.param("project", RELATIVE, id="relative"),
    pytest.param("./project", RELATIVE, id="dot-relative"),
    pytest.param("~/project", RELATIVE, id="tilde-is-not-expanded"),
    pytest.param("", RELATIVE, id="empty"),
    pytest.param("{root}/project\x00/../../etc", NUL, id="nul-byte"),
    pytest.param("{base}/root-evil", OUTSIDE, id="sibling-sharing-the-prefix"),
    pytest.param("{base}/root-evil/project", OUTSIDE, id="inside-the-sibling"),
    pytest.param("{base}/outside", OUTSIDE, id="outside"),
    pytest.param("/", OUTSIDE, id="filesystem-root"),
    pytest.param("{root}/link-out", OUTSIDE, id="symlink-pointing-out"),
    pytest.param("{root}/dangling", OUTSIDE, id="dangling-symlink-pointing-out"),
    pytest.param("{root}/missing", MISSING, id="missing"),
    pytest.param("{root}/file.txt", MISSING, id="a-file"),
    pytest.param("{root}/loop", MISSING, id="symlink-loop"),
    pytest.param("{root}/%2e%2e", MISSING, id="percent-encoded-dotdot-stays-literal"),
    pytest.param("{root}/%2e%2e/%2e%2e/outside", MISSING, id="percent-encoded-escape"),
    pytest.param("{root}/..%2f..%2foutside", MISSING, id="percent-encoded-slash"),
]


def roots_of(tree: dict[str, Path]) -> list[Path]:
    return [tree["root"], tree["other"]]


@pytest.mark.parametrize(("requested", "expected"), ACCEPTED)
def test_accepts_a_directory_inside_a_root_and_returns_its_real_path(
    tree: dict[str, Path], requested: str, expected: str
) -> None:
    resolved = resolve_workspace(requested.format(**tree), roots_of(tree))
    assert resolved == Path(expected.format(**tree))
    assert resolved == resolved.resolve(strict=True)


@pytest.mark.parametrize(("requested", "reason"), REFUSED)
def test_refuses_what_is_not_an_existing_directory_inside_a_root(
    tree: dict[str, Path], requested: str, reason: str
) -> None:
    with pytest.raises(WorkspaceRejected) as raised:
        resolve_workspace(requested.format(**tree), roots_of(tree))
    assert reason in raised.value.detail
    assert raised.value.status == 422


def test_a_root_configured_through_a_symlink_is_compared_by_its_real_path(
    tree: dict[str, Path],
) -> None:
    alias = tree["base"] / "alias"
    alias.symlink_to(tree["root"])
    assert resolve_workspace(f"{alias}/project", [alias]) == tree["root"] / "project"
    assert resolve_workspace(f"{tree['root']}/project", [alias]) == tree["root"] / "project"


def test_a_workspace_in_neither_root_names_the_roots(tree: dict[str, Path]) -> None:
    with pytest.raises(WorkspaceRejected) as raised:
        resolve_workspace(str(tree["base"] / "outside"), roots_of(tree))
    assert raised.value.fields == {
        "workspace": str(tree["base"] / "outside"),
        "roots": [str(tree["root"]), str(tree["other"])],
    }


def test_with_no_roots_nothing_is_accepted(tree: dict[str, Path]) -> None:
    with pytest.raises(WorkspaceRejected, match=OUTSIDE):
        resolve_workspace(str(tree["root"]), [])


def test_a_long_nul_bearing_path_is_truncated_in_the_error() -> None:
    requested = "/" + "a" * 1000 + "\x00"
    with pytest.raises(WorkspaceRejected) as raised:
        resolve_workspace(requested, [Path("/")])
    assert raised.value.fields == {"workspace": requested[:200], "roots": ["/"]}


# --- T6: properties over generated paths ---------------------------------------------------

SEGMENTS = st.one_of(
    st.sampled_from(
        [
            *("..", ".", "", "project", "nested", "deep", "link-in", "link-out", "dangling"),
            *("loop", "%2e%2e", "%2E%2E", "..%2f", "%2f", "%00", "\x00", "~", "etc", "..."),
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/"), max_size=12),
)
PROPERTY = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def inside(path: Path, roots: list[Path]) -> bool:
    real = os.path.realpath(path)
    return any(
        os.path.commonpath([os.path.realpath(r), real]) == os.path.realpath(r) for r in roots
    )


@PROPERTY
@given(segments=st.lists(SEGMENTS, max_size=8), under=st.sampled_from(["root", "base", "/"]))
def test_t6_generated_paths_never_resolve_outside_the_roots(
    tree: dict[str, Path], segments: list[str], under: str
) -> None:
    start = "" if under == "/" else str(tree[under])
    requested = start + "/" + "/".join(segments)
    roots = roots_of(tree)
    try:
        resolved = resolve_workspace(requested, roots)
    except WorkspaceRejected:
        return  # any other exception fails the property
    assert resolved.is_dir()
    assert inside(resolved, roots)
    assert resolved == Path(os.path.realpath(resolved))
    assert "\x00" not in requested
    assert ".." not in Path(requested).parts


@PROPERTY
@given(segments=st.lists(SEGMENTS, max_size=6), at=st.integers(min_value=0, max_value=6))
def test_t6_a_dotdot_segment_or_nul_byte_anywhere_is_refused(
    tree: dict[str, Path], segments: list[str], at: int
) -> None:
    for poison, reason in (("..", DOTDOT), ("a\x00b", NUL)):
        parts = [*segments]
        parts.insert(min(at, len(parts)), poison)
        with pytest.raises(WorkspaceRejected) as refused:
            resolve_workspace(str(tree["root"]) + "/" + "/".join(parts), roots_of(tree))
        assert reason in refused.value.detail or NUL in refused.value.detail


@PROPERTY
@given(suffix=st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.%0123456789", min_size=1, max_size=10))
def test_t6_a_sibling_sharing_the_roots_prefix_is_never_inside(
    tree: dict[str, Path], suffix: str
) -> None:
    if suffix.strip(".") == "":
        return  # "root." or "root.." are not siblings but the root itself or its parent
    sibling = Path(str(tree["root"]) + suffix)
    sibling.mkdir(exist_ok=True)
    with pytest.raises(WorkspaceRejected, match=OUTSIDE):
        resolve_workspace(str(sibling), [tree["root"]])


@PROPERTY
@given(target=st.sampled_from(["/etc", "/", "/tmp", "/proc/self/cwd", "{base}/outside", "{base}"]))
def test_t6_a_symlink_out_of_the_root_is_refused_however_it_is_reached(
    tree: dict[str, Path], target: str
) -> None:
    link = tree["root"] / "project" / "nested" / "escape"
    if not link.is_symlink():
        link.symlink_to(target.format(**tree))
    elif os.readlink(link) != target.format(**tree):
        link.unlink()
        link.symlink_to(target.format(**tree))
    for requested in (link, tree["root"] / "link-in" / "nested" / "escape"):
        with pytest.raises(WorkspaceRejected, match=OUTSIDE):
            resolve_workspace(str(requested), roots_of(tree))


_PATH_TEXT = st.text(alphabet=st.sampled_from(["/", ".", "a", " ", "\x00", "\n", "é"]), max_size=24)


@settings(max_examples=2000, deadline=None)
@given(requested=_PATH_TEXT | st.text(max_size=24))
def test_the_documented_workspace_pattern_states_the_lexical_rules(requested: str) -> None:
    """The API document's pattern accepts exactly the paths the lexical checks let through to
    resolution (inside the roots, which no schema can state)."""
    documented = re.fullmatch(WORKSPACE_PATTERN, requested) is not None and requested != ""
    assert documented == (lexical_problem(requested) is None), requested
