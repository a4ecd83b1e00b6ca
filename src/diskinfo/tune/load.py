"""Load the user's `MODULE:FACTORY` and what it returns, turning every failure into one line.

MODULE is a module name importable from the current directory (as `python -m` finds it) or
a path to a .py file. FACTORY is called with no arguments and returns a torch Dataset or a
DataLoader (whose dataset, batch size, collate_fn and settings then count as the current
ones). With a pack, FACTORY is also called as FACTORY(shards=DEST) and must return a dataset
that reads those shards.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diskinfo.errors import UserError, printable
from diskinfo.fileio import not_root_only


@dataclass
class Workload:
    dataset: Any
    batch_size: int | None = None
    collate_fn: Callable | None = None
    current: dict | None = None  # DataLoader settings when FACTORY returned a DataLoader


def _what(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1]}" if text else type(exc).__name__


def _never_as_root(where: str, spec: str) -> None:
    """Root imports no code from where another account could put it: the `diskinfo` program
    gives up root before tune starts (`privileges`); this holds for in-process callers too."""
    if os.geteuid() == 0 and (part := not_root_only(where)) is not None:
        raise UserError(
            f"cannot import {spec} as root: {printable(part)} is writable by an account other "
            "than root, and tune never runs code from there as root (run it as that user)"
        )


def load_object(spec: str, kind: str = "FACTORY") -> tuple[str, Callable]:
    """'train:make_dataset' or 'path/train.py:make_dataset' -> (name, the callable)."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"expected MODULE:{kind} (e.g. train:make_dataset), got {spec!r}")
    try:
        if module_name.endswith(".py") or "/" in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise UserError(f"no such file: {module_name}")
            _never_as_root(str(path), spec)
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            if loader_spec is None or loader_spec.loader is None:
                raise UserError(f"cannot import {module_name}: not a Python file")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[path.stem] = module  # DataLoader workers that pickle find it again
            loader_spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                _never_as_root(os.getcwd(), spec)
                sys.path.insert(0, os.getcwd())  # as `python -m` does: the user's own modules
            module = importlib.import_module(module_name)
    except UserError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UserError(
                f"cannot import {module_name}: no module named {exc.name!r} (run from the "
                f"directory that holds it, or give a path: path/to/{module_name}.py:{attr})"
            ) from None
        raise UserError(f"importing {module_name} failed: {_what(exc)}") from None
    except BaseException as exc:  # the user's code: any failure, one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UserError(f"importing {module_name} failed: {_what(exc)}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise UserError(f"{module_name} has no {attr}")
    if not callable(obj):
        raise UserError(f"{module_name}.{attr} is not a function")
    return f"{module_name}:{attr}", obj


def call_factory(name: str, factory: Callable, **kwargs: Any) -> Workload:
    import torch.utils.data

    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    try:
        made = factory(**kwargs)
    except BaseException as exc:  # the user's code: any failure, one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UserError(f"{name}({args}) raised {_what(exc)}") from None
    if isinstance(made, torch.utils.data.DataLoader):
        current = {
            "num_workers": made.num_workers,
            "prefetch_factor": made.prefetch_factor if made.num_workers else None,
            "persistent_workers": made.persistent_workers,
            "pin_memory": made.pin_memory,
        }
        return Workload(made.dataset, made.batch_size, made.collate_fn, current)
    if not isinstance(made, torch.utils.data.Dataset):
        raise UserError(
            f"{name}({args}) returned {type(made).__name__}, not a torch Dataset or DataLoader"
        )
    if not isinstance(made, torch.utils.data.IterableDataset):
        try:
            size = len(made)  # type: ignore[arg-type]
        except BaseException as exc:
            raise UserError(f"len() of the dataset from {name}() failed: {_what(exc)}") from None
        if size == 0:
            raise UserError(f"the dataset from {name}({args}) is empty")
    return Workload(made)


def accepts_shards(factory: Callable) -> bool:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return "shards" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def describe_failure(exc: BaseException) -> str:
    """A DataLoader worker's exception arrives as a multi-line text: its first line and the
    original exception's last line."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1:
        return f"{lines[0].strip()} {lines[-1].strip()}"
    return _what(exc)
