"""The shipped Alertmanager config as an operator deploys it: render.sh puts the secret in from
a file (or says in one line why not), and Debian's amtool accepts the result."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT

AM_DIR = ROOT / "monitoring/alertmanager"
AMTOOL = shutil.which("amtool")

pytestmark = pytest.mark.system


def render(secret_file: Path, config: str | None = None) -> subprocess.CompletedProcess[str]:
    text = (AM_DIR / "alertmanager.yml").read_text() if config is None else config
    return subprocess.run(
        ["bash", str(AM_DIR / "render.sh"), str(secret_file)],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_secret_stays_out_of_the_repository():
    shipped = (AM_DIR / "alertmanager.yml").read_text()
    assert 'wechat_api_secret: "@WECOM_API_SECRET@"' in shipped


@pytest.mark.tools("amtool")
def test_the_rendered_config_is_valid(tmp_path: Path):
    (tmp_path / "secret").write_text("Ab-3&x_9\n")  # '&' is special in bash 5.2 replacements
    out = render(tmp_path / "secret")
    assert out.returncode == 0, out.stderr
    assert 'wechat_api_secret: "Ab-3&x_9"' in out.stdout
    (tmp_path / "alertmanager.yml").write_text(out.stdout)
    shutil.copy(AM_DIR / "wecom.tmpl", tmp_path)
    check = subprocess.run(
        [AMTOOL, "check-config", str(tmp_path / "alertmanager.yml")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "1 templates" in check.stdout


@pytest.mark.parametrize(
    ("secret", "config", "says"),
    [
        (None, None, "cannot read the secret file"),
        ("", None, "is empty"),
        ('a"b', None, "holds a quote or backslash"),
        ("s3cret", "route: {}\n", "no @WECOM_API_SECRET@ placeholder"),
    ],
)
def test_bad_input_is_one_line_and_no_output(tmp_path: Path, secret, config, says):
    path = tmp_path / "secret"
    if secret is not None:
        path.write_text(secret + "\n")
    out = render(path, config)
    assert out.returncode != 0 and out.stdout == ""
    assert says in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_out_writes_a_private_file_whole_or_not_at_all(tmp_path: Path):
    """The deployed config holds the secret: never readable with the shell's umask, never
    emptied by a render that fails (`> file` did both)."""
    import grp
    import os
    import stat

    deployed = tmp_path / "deploy" / "alertmanager.yml"
    deployed.parent.mkdir()
    deployed.write_text("the config that works\n")
    deployed.chmod(0o640)
    (tmp_path / "empty").write_text("\n")

    def run(secret: Path, *opts: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", 'umask 000; exec bash "$@"', "sh", str(AM_DIR / "render.sh"),
             "--out", str(deployed), *opts, str(secret)],
            input=(AM_DIR / "alertmanager.yml").read_text(), capture_output=True, text=True,
            timeout=30,
        )  # fmt: skip

    out = run(tmp_path / "empty")
    assert out.returncode == 1 and "is empty" in out.stderr, out
    assert deployed.read_text() == "the config that works\n"
    assert os.listdir(deployed.parent) == ["alertmanager.yml"]

    (tmp_path / "secret").write_text("s3cret\n")
    out = run(tmp_path / "secret")
    assert out.returncode == 0 and out.stdout == "", out
    assert 'wechat_api_secret: "s3cret"' in deployed.read_text()
    assert stat.S_IMODE(deployed.stat().st_mode) == 0o600
    group = grp.getgrgid(os.getgid()).gr_name
    out = run(tmp_path / "secret", "--group", group)
    assert out.returncode == 0, out
    st = deployed.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_gid == os.getgid()
    assert os.listdir(deployed.parent) == ["alertmanager.yml"]
