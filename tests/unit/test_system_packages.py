"""scripts/system-packages.sh: the machine setup step of ``.ci/run``, ``make browser`` and the
README, checked the way a fresh machine meets it.

The first test runs the real ``apt-get install -s`` (simulate: nothing is installed, nothing is
downloaded) for every step as if its tool were missing, so a package line apt would refuse on a
fresh machine of this kind fails here, not in CI's first minute. The others run the script with
recording fakes of ``apt-get``, ``apt-cache`` and ``id`` first on a PATH that holds only what
the test puts there, so each tool's presence is chosen by the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "system-packages.sh"
BASH = shutil.which("bash") or "/bin/bash"

# Each fake apt-get install creates the tool its package provides.
FAKE_APT_GET = r"""#!BASH
printf '%s\n' "$*" >>"$FAKE_STATE/apt-get"
[ "$1" = update ] && exit 0
simulate=false
packages=()
for arg in "$@"; do
  case "$arg" in
    -s) simulate=true ;;
    install | -y | -qq | --no-install-recommends) ;;
    *) packages+=("$arg") ;;
  esac
done
for package in "${packages[@]}"; do
  case " $FAKE_APT_REFUSE " in *" $package "*)
    echo "The following packages have unmet dependencies:"
    echo " nodejs : Conflicts: $package"
    echo "E: Unable to correct problems, you have held broken packages." >&2
    exit 100 ;;
  esac
done
$simulate && { echo "Inst ${packages[*]}"; exit 0; }
for package in "${packages[@]}"; do
  case "$package" in
    iproute2) tool="$FAKE_BIN/ip" ;;
    nodejs) tool="$FAKE_BIN/node" ;;
    bubblewrap) tool="$FAKE_BIN/bwrap" ;;
    python3-venv) touch "$FAKE_STATE/venv"; continue ;;
    chromium) tool="$CHROMIUM" ;;
    postgresql) mkdir -p "$POSTGRESQL_LIB/15/bin"; tool="$POSTGRESQL_LIB/15/bin/initdb" ;;
    *) tool="$FAKE_BIN/$package" ;;
  esac
  printf '#!/bin/sh\n' >"$tool" && chmod +x "$tool"
done
"""

FAKE_APT_CACHE = r"""#!BASH
case "$*" in
  "policy nodejs")
    echo "nodejs:"
    echo "  Installed: ${FAKE_NODEJS_INSTALLED:-(none)}"
    echo "  Candidate: ${FAKE_NODEJS_CANDIDATE:-18.20.4+dfsg-1~deb12u3}" ;;
  "show nodejs="*)
    echo "Package: nodejs"
    [ -n "${FAKE_NODEJS_PROVIDES:-}" ] && echo "Provides: $FAKE_NODEJS_PROVIDES"
    echo "Description: Node.js"
    # Longer than a pipe holds, as real records are: a reader that stops early breaks the pipe.
    for ((line = 0; line < 4000; line++)); do
      echo " Node.js event-based server-side JavaScript"
    done ;;
  *) echo "fake apt-cache: unexpected $*" >&2; exit 1 ;;
esac
"""

FAKE_ID = r"""#!BASH
[ "$1" = -u ] || { echo "fake id: unexpected $*" >&2; exit 1; }
echo "$FAKE_UID"
"""

FAKE_PYTHON = r"""#!BASH
[ -e "$FAKE_STATE/venv" ]
"""

REAL_TOOLS = ("awk", "chmod", "grep", "mkdir", "sed", "touch")
NODESOURCE = "20.20.2-1nodesource1+repack1"
INITDB = "15/bin/initdb"  # under /usr/lib/postgresql: the server package's initdb


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str
    apt_calls: list[str]

    @property
    def installs(self) -> list[str]:
        """The packages of each non-simulated install line, in order."""
        return [
            " ".join(arg for arg in call.split()[1:] if not arg.startswith("-"))
            for call in self.apt_calls
            if call.startswith("install") and " -s " not in f" {call} "
        ]

    @property
    def simulated(self) -> list[str]:
        return [
            " ".join(arg for arg in call.split()[1:] if not arg.startswith("-"))
            for call in self.apt_calls
            if call.startswith("install") and " -s " in f" {call} "
        ]


def _run(
    tmp_path: Path,
    *args: str,
    present: tuple[str, ...] = (),
    uid: int = 0,
    venv: bool = True,
    chromium: bool = False,
    postgresql: str | None = None,
    refuse: tuple[str, ...] = (),
    nodejs_installed: str | None = None,
    nodejs_provides: str | None = None,
) -> Result:
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name in REAL_TOOLS:
        real = shutil.which(name)
        assert real is not None, name
        (bin_dir / name).symlink_to(real)
    fakes = {"apt-get": FAKE_APT_GET, "apt-cache": FAKE_APT_CACHE, "id": FAKE_ID}
    fakes |= {"python3": FAKE_PYTHON} | {tool: "#!/bin/sh\n" for tool in present}
    for name, text in fakes.items():
        path = bin_dir / name
        path.write_text(text.replace("BASH", BASH))
        path.chmod(0o755)
    if venv:
        (state / "venv").touch()
    browser = tmp_path / "chromium"
    if chromium:
        browser.write_text("#!/bin/sh\n")
        browser.chmod(0o755)
    server_lib = tmp_path / "postgresql"
    if postgresql is not None:  # a file under postgresql/<major>/bin, as the packages leave it
        (server_lib / postgresql).parent.mkdir(parents=True)
        (server_lib / postgresql).write_text("#!/bin/sh\n")
        (server_lib / postgresql).chmod(0o755)
    env = {
        "PATH": str(bin_dir),
        "FAKE_BIN": str(bin_dir),
        "FAKE_STATE": str(state),
        "FAKE_UID": str(uid),
        "FAKE_APT_REFUSE": " ".join(refuse),
        "FAKE_NODEJS_PROVIDES": nodejs_provides or "",
        "CHROMIUM": str(browser),
        "POSTGRESQL_LIB": str(server_lib),
        "PYTHON": str(bin_dir / "python3"),
    }
    if nodejs_installed:
        env["FAKE_NODEJS_INSTALLED"] = nodejs_installed
    done = subprocess.run(
        [BASH, str(SCRIPT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    log = state / "apt-get"
    calls = log.read_text().splitlines() if log.exists() else []
    return Result(done.returncode, done.stdout, done.stderr, calls)


def test_a_fresh_machine_gets_every_step_from_apt_without_a_refusal() -> None:
    """Every step against this machine's real apt, in simulate mode, as if its tool were
    missing: the check that catches a package line apt would refuse (``nodejs : Conflicts:
    npm``) before a fresh machine does."""
    if shutil.which("apt-get") is None:
        pytest.skip("the setup step installs Debian packages; this machine has no apt-get")
    done = subprocess.run(
        [BASH, str(SCRIPT), "--simulate"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "LC_ALL": "C"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for tool, package in (
        ("python-venv", "python3-venv"),
        ("ip", "iproute2"),
        ("make", "make"),
        ("node", "nodejs"),
        ("chromium", "chromium"),
        ("postgresql", "postgresql"),
        ("redis-server", "redis-server"),
        ("bwrap", "bubblewrap"),
        ("git", "git"),
    ):
        assert f"ok: {tool}: apt-get install --no-install-recommends {package}" in lines, lines
    npm = [line for line in lines if line.startswith("ok: npm:")]
    assert npm in (
        ["ok: npm: apt-get install --no-install-recommends npm"],
        ["ok: npm: comes with the nodejs package (no package of its own)"],
    ), lines


def test_only_missing_tools_are_installed_each_on_its_own_line(tmp_path: Path) -> None:
    # A NodeSource Node.js: node and npm work, and Debian's npm package conflicts with it.
    done = _run(
        tmp_path,
        present=("node", "npm"),
        refuse=("npm",),
        nodejs_installed=NODESOURCE,
        nodejs_provides="nodejs-dev, nodejs-doc, nodejs-legacy, npm",
    )
    assert done.returncode == 0, done.stderr
    assert done.apt_calls[0] == "update -qq"
    assert done.apt_calls.count("update -qq") == 1
    assert done.installs == [
        *("iproute2", "make", "chromium", "postgresql", "redis-server", "bubblewrap", "git")
    ]
    assert "-y -qq --no-install-recommends" in done.apt_calls[-1]


def test_nothing_is_installed_when_everything_is_there(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        present=("ip", "make", "node", "npm", "redis-server", "bwrap", "git"),
        chromium=True,
        postgresql=INITDB,
    )
    assert (done.returncode, done.apt_calls) == (0, [])


def test_npm_is_its_own_package_only_when_nodejs_does_not_provide_it(tmp_path: Path) -> None:
    # Debian's nodejs: npm is a separate package.
    done = _run(
        tmp_path,
        present=("ip", "make", "node", "redis-server", "bwrap", "git"),
        chromium=True,
        postgresql=INITDB,
    )
    assert done.returncode == 0, done.stderr
    assert done.installs == ["npm"]


def test_a_missing_node_brings_npm_when_the_package_lacks_it(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        present=("ip", "make", "redis-server", "bwrap", "git"),
        chromium=True,
        postgresql=INITDB,
        venv=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.installs == ["python3-venv", "nodejs", "npm"]


def test_a_refused_package_fails_the_run_but_not_the_other_lines(tmp_path: Path) -> None:
    done = _run(tmp_path, present=("node", "npm"), refuse=("chromium",))
    assert done.returncode == 1
    assert done.installs == [
        *("iproute2", "make", "chromium", "postgresql", "redis-server", "bubblewrap", "git")
    ]
    assert "apt-get could not install chromium (for chromium)" in done.stderr
    assert "not installed: chromium" in done.stderr


def test_named_tools_only(tmp_path: Path) -> None:
    done = _run(tmp_path, "chromium")  # ip, make, node and npm are all missing here
    assert done.returncode == 0, done.stderr
    assert done.installs == ["chromium"]


def test_the_database_servers_are_asked_for_by_name(tmp_path: Path) -> None:
    done = _run(tmp_path, "postgresql", "redis-server")
    assert done.returncode == 0, done.stderr
    assert done.installs == ["postgresql", "redis-server"]


def test_postgresql_client_tools_alone_do_not_count_as_the_server(tmp_path: Path) -> None:
    # postgresql-client-15 fills /usr/lib/postgresql/15/bin with psql and friends, no initdb.
    done = _run(tmp_path, "postgresql", postgresql="15/bin/psql")
    assert done.returncode == 0, done.stderr
    assert done.installs == ["postgresql"]


def test_any_major_version_of_the_server_counts(tmp_path: Path) -> None:
    done = _run(tmp_path, "postgresql", "redis-server", postgresql="17/bin/initdb")
    assert done.returncode == 0, done.stderr
    assert done.installs == ["redis-server"]


def test_simulate_runs_every_step_as_if_missing_and_reports_a_refusal(tmp_path: Path) -> None:
    done = _run(tmp_path, "--simulate", present=("ip", "make", "node", "npm"), refuse=("npm",))
    assert done.returncode == 1
    assert done.installs == []
    assert done.simulated == [
        *("python3-venv", "iproute2", "make", "nodejs", "npm", "chromium"),
        *("postgresql", "redis-server", "bubblewrap", "git"),
    ]
    assert "REFUSED: npm: apt-get install --no-install-recommends npm" in done.stderr
    assert "Conflicts: npm" in done.stderr


def test_simulate_skips_npm_when_nodejs_provides_it(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        "--simulate",
        refuse=("npm",),
        nodejs_installed=NODESOURCE,
        nodejs_provides="nodejs-legacy, npm",
    )
    assert done.returncode == 0, done.stderr
    assert "npm" not in done.simulated
    assert "ok: npm: comes with the nodejs package (no package of its own)" in done.stdout


def test_without_root_it_says_what_to_run_and_installs_nothing(tmp_path: Path) -> None:
    done = _run(tmp_path, "chromium", uid=1000)
    assert done.returncode == 1
    assert done.apt_calls == []
    assert "sudo apt-get install --no-install-recommends chromium" in done.stderr


def test_ci_make_and_readme_use_this_one_step() -> None:
    assert "scripts/system-packages.sh\n" in (ROOT / ".ci" / "run").read_text()
    assert "scripts/system-packages.sh chromium" in (ROOT / "Makefile").read_text()
    assert "sudo scripts/system-packages.sh" in (ROOT / "README.md").read_text()
