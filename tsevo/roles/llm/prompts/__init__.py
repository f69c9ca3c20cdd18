"""Prompt assets: text templates with named ``${slot}`` placeholders, shipped in the package.

Prompts live here as ``<name>.txt`` or ``<name>.md`` files, never as long Python strings. A
template renders only when every slot gets a value and no unknown value is passed, so a renamed
slot or a typo fails loudly instead of sending ``${schema}`` to a model. Write a literal dollar
sign as ``$$``.

Example:
    >>> t = load_prompt("retry_feedback")
    >>> sorted(t.slots)
    ['attempt', 'error', 'max_attempts']
    >>> t.render(error="missing field 'answer'", attempt=2, max_attempts=3).splitlines()[0]
    "Your previous reply could not be used: missing field 'answer'"
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from importlib import resources

__all__ = ["PromptError", "PromptTemplate", "available_prompts", "load_prompt"]

_SUFFIXES = (".txt", ".md")


class PromptError(ValueError):
    """A prompt asset is missing, or was rendered with missing or unknown slots."""


@dataclass(frozen=True)
class PromptTemplate:
    """A named text template.

    Attributes:
        name: Asset name (file name without suffix).
        text: Raw template text.
    """

    name: str
    text: str

    def __post_init__(self) -> None:
        t = string.Template(self.text)
        if not t.is_valid():
            raise PromptError(
                f"prompt {self.name!r} has an invalid placeholder (write a literal $ as $$)"
            )

    @property
    def slots(self) -> frozenset[str]:
        """Names of the template's slots."""
        return frozenset(string.Template(self.text).get_identifiers())

    def render(self, **values: object) -> str:
        """Fill every slot.

        Args:
            **values: One value per slot (converted with ``str``).

        Returns:
            The rendered text.

        Raises:
            PromptError: A slot has no value, or a value names no slot.
        """
        missing = self.slots - set(values)
        extra = set(values) - self.slots
        if missing or extra:
            raise PromptError(
                f"prompt {self.name!r}: missing slots {sorted(missing)}, unknown slots "
                f"{sorted(extra)} (template slots: {sorted(self.slots)})"
            )
        return string.Template(self.text).substitute({k: str(v) for k, v in values.items()})


def available_prompts() -> list[str]:
    """Names of the shipped prompt assets."""
    root = resources.files(__name__)
    return sorted(p.name.rsplit(".", 1)[0] for p in root.iterdir() if p.name.endswith(_SUFFIXES))


@functools.lru_cache(maxsize=128)
def load_prompt(name: str) -> PromptTemplate:
    """Load a prompt asset by name (``.txt`` tried before ``.md``).

    Args:
        name: Asset name without suffix, e.g. ``"json_contract"``.

    Returns:
        The template (trailing newlines stripped).

    Raises:
        PromptError: No asset of that name exists.
    """
    root = resources.files(__name__)
    for suffix in _SUFFIXES:
        p = root.joinpath(name + suffix)
        if p.is_file():
            return PromptTemplate(name, p.read_text(encoding="utf-8").rstrip("\n"))
    raise PromptError(f"no prompt asset {name!r}; available: {available_prompts()}")
