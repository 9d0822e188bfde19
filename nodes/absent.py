"""Inputs an API prompt left out, as a node's own ``validate_inputs`` sees them.

ComfyUI calls validate_inputs with only the inputs present in the prompt (execution.validate_inputs,
0.3.75 and 0.33), and with a linked input as None (its value does not exist yet at validation).
A check written ``def validate_inputs(cls, video)`` therefore refused a prompt without 'video'
with Python's "missing 1 required positional argument: 'video'" (issue 50), and one given a
link failed on None. Own checks default every argument to ``ABSENT`` and ask ``missing`` first;
None is left to the node's run, where the value exists.
"""
from __future__ import annotations


class _Absent:
    """Not given at all (None means linked: given, value not known yet)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


def node_title(cls) -> str:
    """The node's display name without the pack suffix, as users see it in the editor."""
    schema = cls.define_schema()   # not GET_SCHEMA: validation runs on a locked clone of the class
    return (schema.display_name or schema.node_id).removesuffix(" (Swapline)")


def sentence(cls, name: str, what: str) -> str:
    return f"{node_title(cls)} needs its '{name}' input: {what}"


def missing(cls, given: dict, what: dict[str, str]) -> str | None:
    """The sentence for the first input in ``given`` (name -> value) the prompt left out, else None.
    ``what``: per input, what to give."""
    for name, value in given.items():
        if value is ABSENT:
            return sentence(cls, name, what[name])
    return None
