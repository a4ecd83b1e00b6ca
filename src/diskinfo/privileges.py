"""Who a `diskinfo` verb started as root runs as: decided by identity, never by a path.

`docker exec CONTAINER diskinfo ...` runs as root, and the paths our verbs read and write (a
pack's SRC and DEST, the logs directory) are the user's to fill with links, FIFOs and folders
swapped at any moment. Any decision that looks at those paths (whose folder is it?) can be
made to come out "root" by a link to a root folder, and root then works in the user's space.
So the decision looks only at what the user cannot touch:

- `NB_USER` (the environment root was started with: the image's ENV, `docker run -e`), looked
  up in the account database (root's /etc/passwd). Set and not root: every verb becomes that
  account (supplementary groups, group, then user, for good: setgroups, setresgid, setresuid,
  as gosu and setpriv do) before it touches any path, and says so in one line on stderr.
- `--as-root` (or `DISKINFO_AS_ROOT=1`) keeps root on purpose. Then every path the verb reads
  or writes must be one root alone controls (`fileio.not_root_only`: every component, as named
  and as resolved, by descriptor), or the verb stops with one line before it starts.
- No NB_USER (a plain host install): root stays root, under the same rule as `--as-root`.

`tune` imports and runs the user's code (FACTORY, --step, --collate): it never does so as root,
in any mode. Without NB_USER it becomes the account `sudo` came from (SUDO_UID), or refuses.
`--cold` keeps one small root helper, forked before the drop, that does nothing but drop the
page cache when asked (`CacheDropper`).
"""

from __future__ import annotations

import argparse
import os
import pwd
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from diskinfo.errors import UserError, printable
from diskinfo.fileio import not_root_only

USER_ENV = "NB_USER"
QUIET = ("resolve", "status")  # write and open nothing: their output stays theirs alone
AS_ROOT_ENV = "DISKINFO_AS_ROOT"
TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str

    def describe(self) -> str:
        return f"{self.name} (uid {self.uid})"


def _account(entry: pwd.struct_passwd, source: str) -> Account:
    if entry.pw_uid == 0:
        raise UserError(
            f"{source} names {entry.pw_name}, uid 0: it must be an unprivileged account"
        )
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def configured_account() -> Account | None:
    """The account NB_USER names, None when it is not set."""
    name = os.environ.get(USER_ENV, "").strip()
    if not name:
        return None
    try:
        return _account(pwd.getpwnam(name), f"{USER_ENV}={name}")
    except KeyError:
        raise UserError(
            f"{USER_ENV}={printable(name)} is no account here, so a verb started as root has "
            f"nobody to run as: set {USER_ENV} to an existing user, or pass --as-root"
        ) from None


def sudo_account() -> Account | None:
    """The account `sudo` was run by (SUDO_UID, which sudo itself sets), if any."""
    uid = os.environ.get("SUDO_UID", "")
    if not uid.isdigit():
        return None
    try:
        return _account(pwd.getpwuid(int(uid)), f"SUDO_UID={uid}")
    except KeyError:
        return None


def become(account: Account) -> None:
    """Give up root for `account`, for good; HOME and the names follow (caches, matplotlib)."""
    os.setgroups(os.getgrouplist(account.name, account.gid))
    os.setresgid(account.gid, account.gid, account.gid)
    os.setresuid(account.uid, account.uid, account.uid)
    os.environ.update(HOME=account.home, USER=account.name, LOGNAME=account.name)


def wants_root(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "as_root", False)) or (
        os.environ.get(AS_ROOT_ENV, "").strip().lower() in TRUE
    )


def touched_paths(args: argparse.Namespace) -> list[str]:
    """Every path a verb that stays root reads or writes, as the verb itself will choose it.
    `resolve`'s and `watch`'s PATHs are only looked at (stat, mountinfo), never opened."""
    verb = getattr(args, "command", None)
    if verb == "pack":
        return [args.src, args.dest]
    if verb == "bench":
        if args.no_save:
            return [args.path]
        from diskinfo.analyse import baseline

        return [args.path, str(Path(args.baseline) if args.baseline else baseline.default_path())]
    if verb == "report":
        return [*args.runs, *([args.png] if args.png else [])]
    if verb == "watch":
        from diskinfo.loader_state import state_dir

        return [args.log_dir, str(state_dir()), *([args.pid_file] if args.pid_file else [])]
    return []


def refuse_user_trees(args: argparse.Namespace, why: str) -> None:
    """Stop unless root alone controls every path the verb touches."""
    for path in touched_paths(args):
        if (part := not_root_only(path)) is not None:
            raise UserError(
                f"{printable(path)}: {printable(part)} is writable by an account other than "
                f"root, and {why}: a verb kept root works only where root alone writes (run it "
                f"as the user instead: set {USER_ENV}, or `docker exec -u USER`, `sudo -u USER`)"
            )


def _tune_as(args: argparse.Namespace, account: Account | None) -> Account:
    if wants_root(args):
        raise UserError(
            "tune runs your code (FACTORY, --step, --collate) and never does so as root: "
            f"leave out --as-root and {AS_ROOT_ENV}"
        )
    target = account or sudo_account()
    if target is None:
        raise UserError(
            "tune runs your code (FACTORY, --step, --collate) and never does so as root: run "
            f"it as your user (`sudo` from it, or set {USER_ENV} to the account to become)"
        )
    if args.cold:
        CacheDropper.start()  # root's one remaining job: drop the page cache when asked
    return target


DROP_CACHES = "/proc/sys/vm/drop_caches"


class CacheDropper:
    """A root process forked before the verb gives up root, whose one job is `sync; echo 3 >
    /proc/sys/vm/drop_caches` each time the verb writes a byte to it (`tune --cold`). It reads
    nothing but that byte, opens nothing but that file and ends when the verb's end of the
    pipe closes; the verb, now the user, runs the user's code."""

    running: CacheDropper | None = None

    def __init__(self) -> None:
        ask_r, self._ask = os.pipe()
        self._answer, answer_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the helper: never returns into the verb, whatever is raised
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the verb's to handle
                for signum in (signal.SIGTERM, signal.SIGHUP):
                    signal.signal(signum, signal.SIG_DFL)  # not the verb's Terminated
                os.close(self._ask)
                os.close(self._answer)
                code = self._serve(ask_r, answer_w)
            finally:
                os._exit(code)
        os.close(ask_r)
        os.close(answer_w)

    @staticmethod
    def _serve(ask: int, answer: int) -> int:
        while os.read(ask, 1):
            try:
                os.sync()
                fd = os.open(DROP_CACHES, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, b"3\n")
                finally:
                    os.close(fd)
                os.write(answer, b"y")
            except OSError:
                os.write(answer, b"n")
        return 0

    @classmethod
    def start(cls) -> None:
        if cls.running is None:
            cls.running = cls()

    def drop(self) -> None:
        os.write(self._ask, b"d")
        if os.read(self._answer, 1) != b"y":
            raise OSError(f"the root helper could not write {DROP_CACHES}")


def decide(args: argparse.Namespace) -> None:
    """Run by `diskinfo` (the program, not an in-process caller) before the verb starts."""
    if os.geteuid() != 0:
        return
    account = configured_account()
    if getattr(args, "command", None) == "tune":
        target: Account | None = _tune_as(args, account)
    elif account is not None and not wants_root(args):
        target = account
    else:
        why = "--as-root keeps root" if wants_root(args) else f"no {USER_ENV} is set"
        refuse_user_trees(args, f"the verb stays root ({why})")
        return
    become(target)
    if getattr(args, "command", None) in QUIET:
        return
    print(
        f"diskinfo: running as {target.describe()}: a verb started as root runs as "
        f"{'NB_USER' if target == account else 'the user sudo came from'} (--as-root keeps "
        "root, for paths only root can write)",
        file=sys.stderr,
        flush=True,
    )
