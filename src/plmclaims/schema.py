"""JSON-schema validation with one-line, actionable error messages.

Claim and tier files are read strictly, because a hostile or careless file must be refused in one short line,
never with a traceback or a line of millions of characters: the file must be UTF-8 text of at most
MAX_BYTES; keys are unique and are text; nesting is at most MAX_DEPTH deep; anchors and aliases are allowed, but
the document they expand to may hold at most MAX_VALUES values (an "alias bomb" of nested aliases is refused
before it is expanded, and so is an alias that contains itself); every number is finite (`.nan` and `.inf`
would pass `minimum: 0` and change verdicts at run time).
"""
from __future__ import annotations

import copy
import json
import math
import reprlib
from functools import lru_cache
from pathlib import Path

import jsonschema
import yaml

from .errors import UserError

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "workflows" / "schemas"
MAX_BYTES = 1_000_000  # the largest shipped claim or tier file is a few kB
MAX_DEPTH = 24  # claims nest about 5 deep, tiers 4
MAX_VALUES = 20_000  # scalars, lists and mappings after expanding aliases
MAX_LINE = 280  # an error line, before the CLI's "plmclaims: error: " prefix: 300 characters in all

_repr = reprlib.Repr()  # keyword arguments need Python 3.12
_repr.maxstring, _repr.maxother, _repr.maxlist, _repr.maxdict, _repr.maxlevel = 40, 40, 4, 3, 2


def short(value) -> str:
    """A bounded repr for error messages (a 300 MB value must not become a 300 MB error line)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {math.inf: ".inf", -math.inf: "-.inf"}.get(value, ".nan")  # YAML's spelling
    text = _repr.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def one_line(message: str, limit: int = MAX_LINE) -> str:
    """The message on one line of at most `limit` characters (the start names the file and the field)."""
    message = " ".join(str(message).split())
    return message if len(message) <= limit else message[: limit - 3] + "..."


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    path = SCHEMA_DIR / f"{name}.schema.json"
    if not path.exists():
        raise UserError(f"{path}: schema file missing; reinstall plmclaims from a full checkout")
    return json.loads(path.read_text())


class _Refused(Exception):
    """Raised inside the loader: (1-based line, what is wrong and what to do)."""


class _Strict:
    """What both loaders add to SafeLoader: duplicate keys refused (PyYAML keeps the last one silently) and the
    document's expanded size and depth bounded before it is constructed."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` merges are overridden by explicit keys, as YAML intends
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:
                continue  # an unhashable key: SafeLoader's own error names it
            if first != key_node.start_mark.line + 1:
                raise _Refused(key_node.start_mark.line + 1, f"duplicate key {short(key)} (first at line {first}); keep one")
        return yaml.constructor.SafeConstructor.construct_mapping(self, node, deep)

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return self.construct_document(node)


class _StrictLoader(_Strict, yaml.SafeLoader):
    """The pure-Python loader, which bounds nesting while it composes (with the line) and words every syntax error
    the way the messages users see do."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        # the composer recurses once per level: bound it before Python's recursion limit does, with a line number
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(self.peek_event().start_mark.line + 1, f"nested more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# libyaml's parser, where PyYAML was built with it: ten times faster, and every job process and every Snakefile parse
# reads all the claims. Its composer recurses in C, so it only reads documents whose nesting _nesting_within has
# checked from the (iterative) event stream; anything else, and any syntax error, goes to _StrictLoader.
_FastStrictLoader = type("_FastStrictLoader", (_Strict, yaml.CSafeLoader), {}) if yaml.__with_libyaml__ else None


def _nesting_within(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the document parses (events only) and nests at most `limit` nodes deep, counted as _StrictLoader
    counts them (a scalar inside n collections is at depth n + 1)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > limit:
                    return False
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)) and depth + 1 > limit:
                return False
    except yaml.YAMLError:
        return False
    return True


def _load(text: str):
    if _FastStrictLoader is not None and _nesting_within(text):
        try:
            return yaml.load(text, Loader=_FastStrictLoader)  # noqa: S506 (a CSafeLoader subclass)
        except yaml.YAMLError:
            pass  # the pure-Python loader words it (libyaml's messages differ)
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_expansion(root) -> None:
    """Count the values the composed document expands to (aliases share nodes, so count them once per use)
    without expanding it: a depth-first pass that memoises each node's expanded size and depth."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    ancestors: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        line = node.start_mark.line + 1
        if finished:
            ancestors.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_VALUES:
                raise _Refused(line, f"aliases (*name) expand this to more than {MAX_VALUES} values; write the values out")
            if depth[key] > MAX_DEPTH:
                raise _Refused(line, f"aliases (*name) nest this more than {MAX_DEPTH} levels deep; write the values out")
            continue
        if key in size:
            continue
        if key in ancestors:
            raise _Refused(line, "an alias (*name) refers to a value that contains it; write the values out")
        ancestors.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node))


def _check_values(data, where: str = "") -> None:
    """Every number finite, every key text (YAML 1.1 reads a bare on/off/yes/no as a boolean)."""
    if isinstance(data, dict):
        for k, v in data.items():
            if not isinstance(k, str):
                hint = " (YAML 1.1 reads on/off/yes/no as booleans)" if isinstance(k, bool) else ""
                raise _Refused(None, f"field '{where or '<top level>'}': key {short(k)} is not text{hint}; quote it")
            _check_values(v, f"{where}.{k}" if where else k)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _check_values(v, f"{where}.{i}" if where else str(i))
    elif isinstance(data, float) and not math.isfinite(data):
        raise _Refused(None, f"field '{where}': got {short(data)}; numbers must be finite")


def read_yaml(path: Path) -> dict:
    """A YAML mapping read strictly (see the module docstring); any problem is one UserError naming the file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except OSError as err:
        raise UserError(one_line(f"{path}: cannot be read ({err.strerror or err})")) from None
    if len(raw) > MAX_BYTES:
        raise UserError(f"{path}: {len(raw)} bytes; a claim or tier file is at most {MAX_BYTES} bytes of YAML")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start}); "
                        "save it as UTF-8 (a UTF-16, Latin-1 or binary file cannot be read)") from None
    try:
        data = _load(text)
        _check_values(data)
    except _Refused as err:
        line, problem = err.args
        raise UserError(one_line(f"{path}:{f' line {line}:' if line else ''} {problem}")) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark else text.count("\n", 0, getattr(err, "position", 0)) + 1  # a ReaderError has a position
        where = f" line {line}"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(one_line(f"{path}:{where} is not valid YAML ({problem}); fix the syntax")) from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def _field(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "<top level>"


def _allowed(values) -> str:
    """An enum's values, cut after about 110 characters (the schema file named beside lists them all)."""
    out, used = [], 0
    for v in map(str, values):
        if used + len(v) > 110:
            return ", ".join(out) + f", ... ({len(values) - len(out)} more)"
        out.append(v)
        used += len(v) + 2
    return ", ".join(out)


def _describe(error: jsonschema.ValidationError) -> str:
    v = error.validator
    if v == "enum":
        return f"got {short(error.instance)}; allowed values: {_allowed(error.validator_value)}"
    if v == "const":
        return f"got {short(error.instance)}; allowed value: {error.validator_value}"
    if v == "type":
        return f"expected type {error.validator_value}, got {type(error.instance).__name__} {short(error.instance)}"
    if v == "required":
        return error.message.replace("is a required property", "is required but missing")
    if v == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed), key=str)
        return f"unknown field {short(extra[0]) if extra else '?'}; allowed fields: {', '.join(allowed)}"
    if v == "pattern":
        return f"{short(error.instance)} does not match the pattern {error.validator_value}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": "at least", "exclusiveMinimum": "above", "maximum": "at most", "exclusiveMaximum": "below"}
        return f"got {short(error.instance)}; must be {words[v]} {error.validator_value}"
    if v in ("minItems", "minProperties", "minLength"):
        return f"got {short(error.instance)}; needs at least {error.validator_value} {'characters' if v == 'minLength' else 'entries'}"
    return one_line(error.message, 120)


@lru_cache(maxsize=None)
def _with_enums(name: str, enums: tuple) -> dict:
    """The schema with the enums its caller owns filled in (the claim schema's families, evaluators, metrics and
    methods come from the family registry, so they are written in one place)."""
    schema = copy.deepcopy(load_schema(name))
    for where, values in enums:
        node = schema
        for k in where[:-1]:
            node = node[k]
        node[where[-1]] = list(values)
    return schema


def validate(data: dict, schema_name: str, path: Path | str, enums: dict | None = None) -> None:
    """Raise UserError naming the file, the field and the allowed values of the first error. `enums` (path in the
    schema -> values) fills the enums the schema file leaves to the code that owns them."""
    schema = _with_enums(schema_name, tuple((k, tuple(v)) for k, v in enums.items())) if enums else load_schema(schema_name)
    validator = jsonschema.Draft202012Validator(schema)
    errors = list(validator.iter_errors(data))
    if not errors:
        return
    # prefer the deepest, most specific error (if/then branches nest the real one)
    leaves = []
    for err in errors:
        stack = [err]
        while stack:
            e = stack.pop()
            if e.context:
                stack.extend(e.context)
            else:
                leaves.append(e)
    best = max(leaves, key=lambda e: (len(e.absolute_path), e.validator != "if"))
    raise UserError(one_line(f"{path}: field '{_field(best)}': {_describe(best)} (see workflows/schemas/{schema_name}.schema.json)"))
