"""The base of every settings section: a misspelt or unknown key fails at start-up, naming it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
