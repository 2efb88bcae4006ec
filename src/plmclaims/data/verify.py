"""Data verified before compute: every file a run will read is checked against the checksums known for its release.

Known checksums come from the data root's ``SHA256SUMS`` (``<sha256>  ./<path>``, as ``sha256sum`` writes it) for
the files it lists, else from ``release-checksums.txt`` pinned in this package for the SentEval and GLUE releases
plmclaims knows. A changed, truncated or unknown file stops the workflow with one line naming the file, what
differs and what to do; ``allow_unverified_data=true`` turns those lines into warnings (the report then marks the
rows that read such data). A missing file is always an error: no run could read it.

The file lists come from the loaders' own path functions (``sts.local_files``, ``glue.local_files``, ``ud.local_files``), so the files
verified are exactly the files scored. Each file is hashed at most once per process (cached by path, size, mtime
and ctime), since verification runs at every workflow start.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..errors import UserError
from . import DEFAULT_DATA_ROOT, glue, sts, ud

PINNED = Path(__file__).with_name("release-checksums.txt")
SUMS_NAME = "SHA256SUMS"
MAX_LINE = 300  # an error line stays readable; long paths are shortened from the left
FIX = "restore the release file, or pass --config allow_unverified_data=true to use other data on purpose"
STS_LAYOUT = ("STS", "SICK")  # what a SentEval-layout folder must hold

_hashes: dict[tuple, str] = {}  # (path, size, mtime, ctime) -> sha256
_tables: dict[tuple, dict[str, str]] = {}  # (checksum file, size, mtime) -> {relative path: sha256}
_sizes: dict[str, int] = {}  # sha256 -> size in bytes, for the releases pinned here (a digest fixes the size)


# ---------------------------------------------------------------- which files a run reads

def sts_files(tier: dict, evaluator: str, form: str, data_root: str | None) -> list[str]:
    """Every data file an STS encode/score run of `evaluator` and text `form` reads ([] for a hub source)."""
    if evaluator not in sts.SOURCE_OF_EVALUATOR:
        raise UserError(f"STS evaluator {evaluator!r} unknown; allowed values: {', '.join(sts.SOURCE_OF_EVALUATOR)}")
    source = tier["data"][sts.SOURCE_OF_EVALUATOR[evaluator]]
    if source["source"] != "local":
        return []
    root = sts.local_root(source, data_root)
    return [str(p) for name in sts.BENCHMARKS for p in sts.local_files(root, name, form, sts.split_for(evaluator, name))]


def glue_source(tier: dict, task: str) -> dict:
    """The GLUE source one task is read from: {'source': 'hub'} for a task the local source lists in `hub_tasks`
    (the local release lacks MNLI and QQP), else data.glue itself without `hub_tasks` (so listing hub tasks changes
    nothing about a local task's runs). The hub is nyu-mll/glue at glue.HUB_REVISION either way."""
    source = tier["data"].get("glue")
    if source is None:
        raise UserError(f"{tier.get('_path', 'tier')}: field 'data.glue' missing; the glue family needs a GLUE source (local or hub)")
    if source["source"] == "local" and task in source.get("hub_tasks", ()):
        return {"source": "hub"}
    return {k: v for k, v in source.items() if k != "hub_tasks"}


def glue_files(tier: dict, task: str, data_root: str | None, splits: tuple[str, ...] = ("train", "dev")) -> list[str]:
    """The train and dev files (or `splits`) of a GLUE task under the tier's local GLUE source ([] for a task read
    from the hub: no local file, its revision is pinned instead)."""
    source = glue_source(tier, task)
    if source["source"] != "local":
        return []
    root = glue.local_root(source, data_root)
    return [str(p) for split in splits for p in glue.local_files(root, task, split)]


def ud_files(tier: dict, splits: tuple[str, ...], data_root: str | None) -> list[str]:
    """The UD English EWT files of `splits` under the tier's local UD source (the probing family's runs)."""
    source = tier["data"].get("ud")
    if source is None:
        raise UserError(f"{tier.get('_path', 'tier')}: field 'data.ud' missing; the probing family needs the UD English "
                        "EWT source, e.g. ud: {source: local, path: \"{data_root}/ud\"}")
    if source["source"] != "local":
        raise UserError(f"{tier.get('_path', 'tier')}: field 'data.ud.source': got {source['source']!r}; allowed values: local "
                        "(the UD English EWT release files under the data root)")
    root = ud.local_root(source, data_root)
    return [str(p) for split in splits for p in ud.local_files(root, split)]


# ---------------------------------------------------------------- known checksums

def _root(data_root: str | Path | None) -> str:
    return os.path.abspath(DEFAULT_DATA_ROOT if data_root is None else data_root)


def _relative(path: str, data_root: str | Path | None) -> str | None:
    """The path as SHA256SUMS names it (relative to the data root), or None for a file outside it."""
    rel = os.path.relpath(os.path.abspath(path), _root(data_root))
    return None if rel == os.pardir or rel.startswith(os.pardir + os.sep) else Path(rel).as_posix()


def _read_table(path: Path, pinned: bool) -> dict[str, str]:
    """{relative path: sha256} of a SHA256SUMS file (or the pinned table, which has a size column); cached."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _tables:
        table = {}
        for lineno, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split(maxsplit=2 if pinned else 1)
            if len(parts) != (3 if pinned else 2) or len(parts[0]) != 64:
                raise UserError(f"{path}:{lineno}: expected '<sha256>  <path>' as sha256sum writes it; "
                                "regenerate it with 'sha256sum' in the data root, or remove it")
            name = parts[-1].removeprefix("*").removeprefix("./")
            table[name] = parts[0].lower()
            if pinned:
                _sizes[parts[0].lower()] = int(parts[1])
        _tables[key] = table
    return _tables[key]


def _known(data_root: str | Path | None) -> dict[str, tuple[str, str]]:
    """{relative path: (sha256, where that checksum comes from)}: the data root's SHA256SUMS over the pinned table."""
    known = {rel: (digest, "the pinned release checksums") for rel, digest in _read_table(PINNED, pinned=True).items()}
    sums = Path(_root(data_root)) / SUMS_NAME
    if sums.is_file():
        known.update({rel: (digest, f"the data root's {SUMS_NAME}") for rel, digest in _read_table(sums, pinned=False).items()})
    return known


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, hashed once per process for a given (path, size, mtime, ctime)."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _hashes:
        with open(path, "rb") as f:
            _hashes[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return _hashes[key]


# ---------------------------------------------------------------- checks

def _line(path: str, text: str) -> str:
    """'<path>: <text>' in at most MAX_LINE characters (a long path loses its beginning, never the file name)."""
    room = max(MAX_LINE - len(text) - 2, 40)
    if len(path) > room:
        path = "…" + path[-(room - 1):]
    return f"{path}: {text}"


def _more(n: int) -> str:
    """' (and 2 more files)': how many other files have a problem, so one line still tells the whole count."""
    return f" (and {n} more file{'s' if n > 1 else ''})" if n else ""


def _problem(path: str, known: dict, data_root: str | Path | None) -> str | None:
    """What is wrong with one existing file, or None when it is the known release file."""
    rel = _relative(path, data_root)
    if rel is None or rel not in known:
        where = "it is outside the data root" if rel is None else f"neither the data root's {SUMS_NAME} nor the pinned release checksums list it"
        return f"no known checksum ({where})"
    expected, source = known[rel]
    size, want = os.path.getsize(path), _sizes.get(expected)
    if want is not None and size != want:  # cheaper than hashing, and says more: '20 bytes short'
        return f"{size} bytes where the release file has {want} ({size - want:+d})"
    actual = file_sha256(path)
    if actual != expected:
        return f"sha256 {actual[:12]}, expected {expected[:12]} ({source})"
    return None


def verify_files(paths: list[str], data_root: str | None, allow_unverified: bool = False) -> list[str]:
    """Check every path against the known checksums; raise one UserError line for the first problem (counting
    the others), or with `allow_unverified` return one warning line per file that is not the known release."""
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise UserError(_line(missing[0], f"data file missing{_more(len(missing) - 1)}; restore it from the release, or pass "
                                          "--config data_root=<a complete copy>"))
    known = _known(data_root)
    problems = [(p, what) for p in dict.fromkeys(paths) if (what := _problem(p, known, data_root)) is not None]
    if not problems:
        return []
    if allow_unverified:
        return [_line(p, f"{what}; used anyway (allow_unverified_data=true), the report marks the rows that read it")
                for p, what in problems]
    path, what = problems[0]
    raise UserError(_line(path, f"{what}{_more(len(problems) - 1)}; {FIX}"))


def is_verified(path: str, sha256: str, data_root: str | None) -> bool:
    """Whether a file a run recorded (path and sha256 from its provenance) is the known release file.

    Hub records ('<id>@<revision>:<file>', '<id>:<config>/<split>') are identified by their hub id and revision,
    which the hub layer pins; they count as verified here. A local file needs a known checksum equal to `sha256`."""
    if ":" in path and not os.path.exists(path):
        return True
    rel = _relative(path, data_root)
    known = _known(data_root)
    return rel is not None and rel in known and known[rel][0] == sha256.lower()


def check_data_root(data_root: str | None, tier: dict | None = None, files: list[str] | None = None) -> None:
    """Planning-time check (dry run included): the data root exists and holds the layout of the local sources
    (`tier`'s, or SentEval's senteval/ and GLUE's glue/ that every shipped tier reads); with `files` (the planned
    runs' data files), only the sources those files lie in, so a claim selection needs only its own data."""
    root = Path(DEFAULT_DATA_ROOT if data_root is None else data_root)
    hint = "pass --config data_root=<folder holding senteval/ (SentEval's layout) and glue/>"
    if not root.is_dir():
        full = "" if root.is_absolute() else f" ({os.path.abspath(root)})"
        raise UserError(f"data_root {str(root)!r}: folder not found{full}; {hint}"[:MAX_LINE])
    data = tier["data"] if tier else {"sts": {"source": "local", "path": "{data_root}/senteval"},
                                      "glue": {"source": "local", "path": "{data_root}/glue"}}
    folders = {}  # local source folder -> what it must hold
    for key, source in data.items():
        if isinstance(source, dict) and source.get("source") == "local":
            if key.startswith("sts"):
                folders[sts.local_root(source, data_root)] = STS_LAYOUT
            elif key == "glue":
                folders[glue.local_root(source, data_root)] = ()
            elif key == "ud":
                folders[ud.local_root(source, data_root)] = ()
    if files is not None:
        planned = [os.path.abspath(f) for f in files]
        folders = {f: lay for f, lay in folders.items()
                   if any(p.startswith(os.path.abspath(f) + os.sep) for p in planned)}
    for folder, layout in folders.items():
        lacks = [name for name in layout if not (folder / name).is_dir()] if folder.is_dir() else [folder.name]
        if lacks:
            where = folder if folder.is_dir() else folder.parent
            raise UserError(f"data_root {str(root)!r}: {where} has no {', '.join(n + '/' for n in lacks)}; {hint}"[:MAX_LINE])


def allow_unverified(config: dict) -> bool:
    """The workflow's allow_unverified_data flag: `--config allow_unverified_data=true` arrives as the string 'true'."""
    return config.get("allow_unverified_data", False) in (True, "true")
