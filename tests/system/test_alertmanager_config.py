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


@pytest.mark.skipif(AMTOOL is None, reason="needs amtool (apt install prometheus-alertmanager)")
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
