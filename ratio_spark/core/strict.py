"""The base of every settings section: a misspelt or unknown key fails at start-up, naming it."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _compiles(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a regular expression: {exc}") from None
    return value


# A settings field holding a Python regular expression: a bad one fails at start-up, naming the key.
RegexPattern = Annotated[str, AfterValidator(_compiles)]
