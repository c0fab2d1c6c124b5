"""Reading a text file a person wrote or exported (a prompt, a CSV, a word list): whatever is wrong with it
(missing, unreadable, not UTF-8) becomes one line that names the file, as the caller's own error type."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


def read_text(path: str | os.PathLike | Traversable, error: type[Exception]) -> str:
    """The file's text (UTF-8, without the byte-order mark spreadsheets put before a CSV's header); ``error``
    with one line naming the file when it cannot be read as such."""
    path = Path(path) if isinstance(path, (str, os.PathLike)) else path
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.object[exc.start:exc.start + 1]!r}); "
                    "save it as UTF-8") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
