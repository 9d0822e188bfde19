"""One server-side check of every enumerated and linked input, installed on every Swapline node.

ComfyUI 0.3.75 serves a V3 combo as "COMBO" and never checks its value: a typo such as
mode "Identity" reached Track Faces, fell through to "all" and swapped the wrong person.
0.33 checks combos itself, but only for inputs its node's validate_inputs does not name. So
every node gets a generated ``validate_inputs`` that names its combo and socket inputs (never
**kwargs: that would switch off core's min/max checks of all the others), runs the node's own
check first, then rejects any combo value outside the schema's options and any literal given
where a socket must be connected. The prompt is rejected at /prompt before anything runs.
"""
from __future__ import annotations

import functools
import inspect
import os

from comfy_api.latest import io

from ..swapline_core.memory import release_memory
from .absent import sentence
from .model_paths import public_text

SHOWN_OPTIONS = 20  # a folder of hundreds of models must not flood an API client's error text


def _own_validator(node_cls):
    """The node's hand-written validate_inputs (function, arg names), or (None, [])."""
    base = io.ComfyNode.validate_inputs.__func__
    for c in node_cls.__mro__:
        if c is io.ComfyNode:
            break
        attr = c.__dict__.get("validate_inputs")
        if attr is None:
            continue
        func = attr.__func__ if isinstance(attr, classmethod) else attr
        if func is base or getattr(func, "_swapline_generated", False):
            return getattr(func, "_swapline_own", None), list(getattr(func, "_swapline_own_args", []))
        args = inspect.getfullargspec(func).args[1:]
        return func, args
    return None, []


def _combos_and_sockets(schema) -> tuple[dict[str, list], dict[str, str]]:
    combos, sockets = {}, {}
    for inp in schema.inputs:
        if isinstance(inp, io.Combo.Input) and not getattr(inp, "multiselect", False):
            combos[inp.id] = list(inp.options or [])
        elif not isinstance(inp, io.WidgetInput):
            sockets[inp.id] = inp.get_io_type() if hasattr(inp, "get_io_type") else type(inp).__name__
    return combos, sockets


def describe_choices(options: list) -> str:
    shown = ", ".join(repr(o) for o in options[:SHOWN_OPTIONS])
    more = len(options) - SHOWN_OPTIONS
    return shown + (f", ... ({len(options)} in all)" if more > 0 else "") if options else "(none)"


def check_values(node_cls, values: dict, skip: set[str] = frozenset()) -> list[str]:
    """Problems with the given input values, judged against the node's current schema."""
    # define_schema, not GET_SCHEMA: ComfyUI validates on a locked clone of the class, and
    # GET_SCHEMA would try to cache the schema on it
    schema = node_cls.define_schema()
    combos, sockets = _combos_and_sockets(schema)
    label = f"{schema.display_name or schema.node_id} ({schema.node_id})"
    problems = []
    for name, options in combos.items():
        if name in skip or name not in values or values[name] is None:
            continue
        if values[name] not in options:
            problems.append(f"{label}: input '{name}' got {values[name]!r}; allowed: {describe_choices(options)}")
    for name, kind in sockets.items():
        # a linked input reaches validation as None (its value does not exist yet); anything else is a literal
        if values.get(name) is not None:
            problems.append(f"{label}: input '{name}' must be connected to a node's {kind} output; "
                            f"got the literal value {values[name]!r}")
    return problems


def _scrub(exc: BaseException) -> None:
    """Rewrite an exception's text in place (same type, same traceback) without server paths."""
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (public_text(exc.args[0]), *exc.args[1:])
    for attr in ("filename", "filename2"):
        if isinstance(getattr(exc, attr, None), str):
            setattr(exc, attr, public_text(getattr(exc, attr)))
    # ComfyUI reports the exception's module as its type, and names a custom node's modules by
    # their absolute path: ".../custom_nodes/swapline.swapline_core.errors" -> "swapline.swapline_core.errors"
    module = type(exc).__module__ or ""
    if os.sep in module:
        try:
            type(exc).__module__ = module.rsplit(os.sep, 1)[-1]
        except (TypeError, AttributeError):  # built-in types cannot be changed (nor need to be)
            pass


def _guard_execute(node_cls) -> None:
    """Errors sent to API clients name files relative to ComfyUI's folders, and freed frame
    memory is returned after every node (issue 18)."""
    func = node_cls.execute.__func__
    if getattr(func, "_swapline_generated", False):
        return
    if inspect.iscoroutinefunction(func):
        async def execute(cls, *args, **kwargs):
            try:
                return await func(cls, *args, **kwargs)
            except Exception as exc:
                _scrub(exc)
                raise
            finally:
                release_memory()
    else:
        def execute(cls, *args, **kwargs):
            try:
                return func(cls, *args, **kwargs)
            except Exception as exc:
                _scrub(exc)
                raise
            finally:
                release_memory()  # large frames freed by this node go back to the OS
    functools.update_wrapper(execute, func)
    execute._swapline_generated = True
    node_cls.execute = classmethod(execute)


def install(node_cls) -> None:
    """Give ``node_cls`` a validate_inputs that checks every combo and socket (idempotent), and
    keep absolute server paths out of its error texts."""
    _guard_execute(node_cls)
    own, own_args = _own_validator(node_cls)
    own_required = [] if own is None else [
        p.name for p in list(inspect.signature(own).parameters.values())[1:]
        if p.default is inspect.Parameter.empty and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    combos, sockets = _combos_and_sockets(node_cls.define_schema())
    names = list(dict.fromkeys(own_args + list(combos) + list(sockets)))
    if not names:
        return

    def validate_inputs(cls, **values):
        # a file list re-read by the node's own check: still, a number is not a file name (it
        # used to reach os.path.join and come back as a Python TypeError)
        typed = [f"{node_cls.define_schema().node_id}: input '{k}' must be a name (text), got {values[k]!r}"
                 for k in own_args if k in combos and values.get(k) is not None and not isinstance(values[k], str)]
        if typed:
            return "; ".join(typed)
        if own is not None:
            # an own check whose argument has no default (absent.py) would answer a prompt without
            # that input with Python's "missing 1 required positional argument": name it instead
            gap = [k for k in own_required if k not in values]
            if gap:
                return sentence(cls, gap[0], "give it a value in the prompt (as the editor's widget would)")
            res = own(cls, **{k: values[k] for k in own_args if k in values})
            if res is not True:
                return public_text(res) if isinstance(res, str) else res
        # the node's own check owns the inputs it names (e.g. file lists re-read from disk)
        problems = check_values(node_cls, values, skip=set(own_args) - set(sockets))
        return public_text("; ".join(problems)) if problems else True

    # ComfyUI decides which inputs to pass (and which to range-check itself) from the argument
    # names it reads with inspect.getfullargspec, which honours __signature__.
    params = [inspect.Parameter("cls", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for n in names]
    validate_inputs.__signature__ = inspect.Signature(params)
    validate_inputs._swapline_generated = True
    validate_inputs._swapline_own = own
    validate_inputs._swapline_own_args = own_args
    validate_inputs.__qualname__ = f"{node_cls.__name__}.validate_inputs"
    node_cls.validate_inputs = classmethod(validate_inputs)
