"""JSON-schema validation with one-line, actionable error messages."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import jsonschema
import yaml

from .errors import UserError

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "workflows" / "schemas"


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    path = SCHEMA_DIR / f"{name}.schema.json"
    if not path.exists():
        raise UserError(f"{path}: schema file missing; reinstall plmclaims from a full checkout")
    return json.loads(path.read_text())


def read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}:{where} is not valid YAML ({getattr(err, 'problem', err)}); fix the syntax") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def _field(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    v = error.validator
    if v == "enum":
        return f"got {error.instance!r}; allowed values: {', '.join(map(str, error.validator_value))}"
    if v == "type":
        return f"expected type {error.validator_value}, got {type(error.instance).__name__} {error.instance!r}"
    if v == "required":
        return error.message.replace("is a required property", "is required but missing")
    if v == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return f"{error.message}; allowed fields: {', '.join(allowed)}"
    if v == "pattern":
        return f"{error.instance!r} does not match the pattern {error.validator_value}"
    return error.message


def validate(data: dict, schema_name: str, path: Path | str) -> None:
    """Raise UserError naming the file, the field and the allowed values of the first error."""
    schema = load_schema(schema_name)
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
    raise UserError(f"{path}: field '{_field(best)}': {_describe(best)} (see workflows/schemas/{schema_name}.schema.json)")
