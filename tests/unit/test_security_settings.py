"""The start-up's settings check (docker/start/settings.py), PUBLIC_KEY lines (ssh_keys.py) and the
JUPYTER_ARGS refusals (jupyter_args.py): every bad value one line naming the variable."""

from __future__ import annotations

import grp
import pwd

import pytest

from tests.helpers.scripts import load

jupyter_args = load("start/jupyter_args.py")
ssh_keys = load("start/ssh_keys.py")
settings = load("start/settings.py")

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMy/wCKJ7GnsawncSSEJxyqhGZ1b5lq7wc4Py7LYsVxV me@host"


def _bad(env: dict[str, str]) -> str:
    with pytest.raises(settings.Bad) as caught:
        settings.check(env)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("value", ["0", "00", "000"])
def test_uid_zero_in_any_spelling_is_refused_as_root(value):
    message = _bad({"NB_UID": value})
    assert message.startswith(f"NB_UID={value} is root") and "refused" in message


@pytest.mark.parametrize("value", ["0x0", "+0", "1e3", "-1", " 1000", "abc", "", "2147483648"])
def test_uid_must_be_decimal_digits(value):
    message = _bad({"NB_UID": value})
    assert message.startswith("NB_UID must be a whole number") and repr(value) in message


def test_numbers_come_back_canonical():
    values, _ = settings.check(
        {"NB_UID": "01234", "NB_GID": "0100", "TRAIN_LOG_MAX_BYTES": "50M", "KEEP_ALIVE": "yes"}
    )
    assert values == {
        "NB_UID": "1234",
        "NB_GID": "100",
        "TRAIN_LOG_MAX_BYTES": str(50 * 2**20),
        "KEEP_ALIVE": "1",
    }


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("DISKINFO_INTERVAL", "0", "above 0"),
        ("DISKINFO_INTERVAL", "-1", "above 0"),
        ("DISKINFO_INTERVAL", "abc", "above 0"),
        ("DISKINFO_INTERVAL", "nan", "above 0"),
        ("METRICS_PORT", "99999", "port from 1 to 65535, or 0"),
        ("JUPYTER_PORT", "0", "port from 1 to 65535"),
        ("SSH_PORT", "22x", "port"),
        ("TRAIN_LOG_MAX_BYTES", "50Q", "a size"),
        ("TRAIN_LOG_BACKUPS", "-1", "whole number"),
        ("STARTUP_HOOK_TIMEOUT", "0", "whole number from 1"),
        ("JUPYTER_ENABLE", "maybe", "1 or 0"),
        ("METRICS_ADDR", "everywhere", "IP address"),
        ("LOG_DIR", "logs", "absolute path"),
        ("CA_BUNDLE_FILE", "proxy-ca.pem", "absolute path"),
        ("JUPYTER_TOKEN", "", "never runs without a token"),
        ("JUPYTER_ARGS", "--ServerApp.tornado_settings=disable_check_xsrf=1", "XSRF"),
        ("NB_USER", "Bad Name", "plain user name"),
    ],
)
def test_each_bad_setting_is_one_line_naming_it(name, value, says):
    message = _bad({name: value})
    assert message.startswith(name) and says in message


def test_interval_accepts_fractions():
    assert settings.check({"DISKINFO_INTERVAL": "0.5"})[0] == {"DISKINFO_INTERVAL": "0.5"}


def test_two_services_on_one_port_are_refused():
    assert "both 9000" in _bad({"SSH_PORT": "9000", "METRICS_PORT": "9000"})
    # Jupyter off frees its port; the metrics server off (0) clashes with nothing
    settings.check({"SSH_PORT": "9000", "JUPYTER_PORT": "9000", "JUPYTER_ENABLE": "0"})
    settings.check({"METRICS_PORT": "0", "SSH_PORT": "22"})


def test_an_existing_system_account_is_not_a_user_name():
    def lookup(name):
        if name in ("root", "bin", "jovyan"):
            return pwd.struct_passwd((name, "x", 2, 2, "", "/bin", "/usr/sbin/nologin"))
        raise KeyError(name)

    for name in ("root", "bin"):
        with pytest.raises(settings.Bad, match=f"NB_USER={name} names an existing system"):
            settings.user_name(name, lookup, lambda: "jovyan")
    assert settings.user_name("jovyan", lookup, lambda: "jovyan") == "jovyan"
    assert settings.user_name("alice", lookup, lambda: "jovyan") == "alice"


@pytest.mark.parametrize(
    ("value", "paths"),
    [
        ("/workspace/my data", ["/workspace/my data"]),
        ("/workspace/data /workspace", ["/workspace/data", "/workspace"]),
        ("/workspace/my data:/scratch", ["/workspace/my data", "/scratch"]),
        ("/a/", ["/a"]),
    ],
)
def test_diskinfo_paths_keep_spaces(value, paths):
    assert settings.check({"DISKINFO_PATHS": value})[1] == paths


def test_a_relative_watched_path_is_refused():
    assert "'data' is not absolute" in _bad({"DISKINFO_PATHS": "/workspace/my:data"})


def test_public_key_lines_with_options_are_keys():
    lines = [
        KEY,
        f'from="10.0.0.0/8,127.0.0.1",no-pty {KEY}',
        f'command="echo a b, c",restrict {KEY}',
        "# a comment",
        "",
    ]
    keys, bad = ssh_keys.key_lines("\n".join(lines))
    assert keys == lines[:3] and bad == []


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("garbage", "no known key type"),
        ("ssh-ed25519 not-base64!", "not valid base64"),
        (
            "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIMy/wCKJ7GnsawncSSEJxyqhGZ1b5lq7wc4Py7LYsVxV",
            "not ssh-rsa",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "PRIVATE key"),
        ('from="unbalanced ssh-ed25519 AAAA', "unbalanced quotes"),
    ],
)
def test_a_non_key_line_is_named_by_number_and_never_echoed(line, says):
    message = _bad({"PUBLIC_KEY": f"{KEY}\n{line}"})
    assert message.startswith("PUBLIC_KEY line 2 is not an SSH public key") and says in message
    assert line not in message


@pytest.mark.parametrize(
    "arg",
    [
        "--ServerApp.tornado_settings=disable_check_xsrf=1",
        "--ServerApp.tornado_settings",
        "--ServerApp.disable_check_xsrf=True",
        "--IdentityProvider.token=",
        "--ServerApp.token=x",
        "--NotebookApp.password=x",
        "--ServerApp.allow_origin=*",
        "--ServerApp.allow_credentials=True",
        "--ServerApp.cookie_options=x=1",
        "--ServerApp.trust_xheaders=True",
        "--ServerApp.identity_provider_class=x.Y",
        "--ServerApp.authorizer_class=x.Y",
        "--ServerApp.allow_unauthenticated_access=True",
        "--config=/workspace/evil.py",
        "--ServerApp.login_handler_class=x.Y",
        "--ServerApp.authenticate_prometheus=False",  # /metrics without the token
    ],
)
def test_jupyter_args_that_weaken_auth_are_refused(arg):
    with pytest.raises(ValueError, match="JUPYTER_ARGS may not set"):
        jupyter_args.split(f"--ServerApp.ip=0.0.0.0 {arg}")


@pytest.mark.parametrize("arg", ["--port=9999", "--ServerApp.port=9999", "--port-retries=5"])
def test_jupyter_args_cannot_move_the_port_away_from_jupyter_port(arg):
    with pytest.raises(ValueError, match="use -e JUPYTER_PORT=N"):
        jupyter_args.split(f"--ServerApp.base_url=/x/ {arg}")


def test_plain_jupyter_args_pass():
    assert jupyter_args.split("--ServerApp.base_url=/x/ --collaborative") == [
        "--ServerApp.base_url=/x/",
        "--collaborative",
    ]


def _group(gid: int) -> grp.struct_group:
    names = {0: "root", 20: "dialout", 42: "shadow", 4: "adm", 100: "users", 1000: "me"}
    if gid not in names:
        raise KeyError(gid)
    return grp.struct_group((names[gid], "x", gid, []))


@pytest.mark.parametrize(
    ("value", "name"), [("0", "root"), ("00", "root"), ("42", "shadow"), ("4", "adm")]
)
def test_a_privileged_group_is_refused_as_nb_gid(value, name):
    with pytest.raises(settings.Bad) as caught:
        settings.gid(value, _group)
    assert str(caught.value).startswith(f"NB_GID={value} is the group {name},")


@pytest.mark.parametrize("value", ["100", "20", "1000", "4242"])  # users, a Mac's staff, own
def test_ordinary_groups_are_accepted_as_nb_gid(value):
    assert settings.gid(value, _group) == value


def test_nb_gid_zero_is_refused_through_the_settings_check():
    assert _bad({"NB_GID": "0"}).startswith("NB_GID=0 is the group root,")


@pytest.mark.parametrize("value", ["/workspace/a\n/etc", "/workspace\r", "/a:/b\tc", "/x\x7f"])
def test_a_control_character_in_diskinfo_paths_is_refused(value):
    assert "DISKINFO_PATHS holds a control character" in _bad({"DISKINFO_PATHS": value})
