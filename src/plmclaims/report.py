"""The claim report: claims.md, claims.csv, claims.json and a forest plot of reported vs measured."""
from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

from .provenance import atomic_write_json, atomic_write_text

VERDICT_MEANING = {
    "reproduced": "the judged relations hold (and, where this tier runs the paper's assets, magnitudes are within tolerance)",
    "direction-holds": "the relations hold but a magnitude is off by more than the claim's tolerance",
    "not-reproduced": "a judged relation is contradicted: its bootstrap interval lies entirely on the wrong side of the margin",
    "inconclusive": "an interval straddles the margin, a credited side is not above its floor (chance or a control), too few tasks are informative, or a run is degenerate",
    "not-run": "this tier cannot provide a role the claim needs, or judges none of its checks; the reason is given",
    "error": "a run or check failed",
}


def _fmt(x, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def _measured(m: dict) -> str:
    if m.get("curve"):
        return f"a curve of {len(m['curve'])} points (see Curves)"
    if m.get("measured") is None:
        return "not run"
    seeds = m.get("seeds") or []
    spread = f", {len(seeds)} seeds {min(seeds):.1f}–{max(seeds):.1f}" if len(seeds) > 1 else ""
    return f"{_fmt(m['measured'])} [{_fmt(m['ci_low'])}, {_fmt(m['ci_high'])}]{spread}"


def _params(m: dict) -> str:
    """Trained / total parameters of a fine-tuning measurement, e.g. '74.5K / 22.8M (0.33%)'."""
    if m.get("trained_params") is None or not m.get("total_params"):
        return "—"
    return f"{_count(m['trained_params'])} / {_count(m['total_params'])} ({100 * m['trained_fraction']:.2f}%)"


def _count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def _source(v: dict) -> str:
    s = v["source"]
    arxiv = f" (arXiv {s['arxiv']})" if s.get("arxiv") else ""
    return f"{s['paper']}{arxiv}, {s['table']}"


REHEARSAL = "rehearsal: random stand-in weights, the number means nothing"


def _verdict_word(v: dict) -> str:
    return f"{v['verdict']} (rehearsal)" if v.get("rehearsal") else v["verdict"]


def rows(verdicts: list[dict]) -> list[dict]:
    """One row per (claim, measurement): the flat form of the report (CSV, table)."""
    out = []
    for v in verdicts:
        for name, m in v["measurements"].items():
            out.append({"claim": v["id"], "seed_point": v.get("seed_point", ""), "tier": v["tier"], "verdict": _verdict_word(v),
                        "source": _source(v), "measurement": name, "label": m.get("label", name),
                        "reported": m.get("reported"), "measured": m.get("measured"), "ci_low": m.get("ci_low"),
                        "ci_high": m.get("ci_high"), "substitute_for": m.get("substitute_for", ""),
                        "random_weights": (m.get("random_weights") or {}).get("measured"), "floors": _floors(m),
                        "trained_params": m.get("trained_params"), "total_params": m.get("total_params"),
                        "peak_memory_mb": m.get("peak_memory_mb"), "unverified_data": ";".join(m.get("unverified_data", [])),
                        "note": "; ".join(x for x in (REHEARSAL if v.get("rehearsal") else "", m.get("reason", "")) if x)})
    return out


def readme_verdict(v: dict) -> str:
    """The README claim table's verdict cell: the verdict in bold, whether the claim file expected it, the verdict
    engine's first reason (its note's first sentence, up to the first ';' if long; run paths left out) and each
    measurement's average with its random-weights twin's. The report itself (claims.md) has every number, interval
    and check."""
    expected = {True: " (as expected)", False: " (not the expected verdict)"}.get(v.get("matches_expected"), "")
    reason = re.sub(r"\S+/metrics\.json: ", "", v["note"]).split(". ")[0]
    reason = (reason.split("; ")[0] if len(reason) > 200 else reason).strip().rstrip(".")
    measured = []
    for name, m in v["measurements"].items():
        if m.get("measured") is not None:
            twin = (m.get("random_weights") or {}).get("measured")
            measured.append(f"{name} {_fmt(m['measured'])}" + (f" (twin {_fmt(twin)})" if twin is not None else ""))
    cell = f"**{_verdict_word(v)}**{expected}" + (f": {reason}" if reason else "")
    cell += f". Averages: {', '.join(measured)}" if measured else ""
    return cell.replace("|", "\\|")


def sync_readme(text: str, verdicts: list[dict]) -> tuple[str, list[str]]:
    """`text` (a README) with the last cell of each claim row (a table row starting `| `<claim id>` |`) set to
    readme_verdict, and the ids of the verdicts that have no row."""
    by_id = {v["id"]: v for v in verdicts}
    seen, lines = set(), []
    for line in text.split("\n"):
        m = re.match(r"\| `([^`]+)` \|", line)
        if m and m.group(1) in by_id:
            cells = re.split(r"(?<!\\)\|", line)  # '', claim, seed point, source, checks, verdict..., ''
            line = "|".join(cells[:5]) + f"| {readme_verdict(by_id[m.group(1)])} |"
            seen.add(m.group(1))
        lines.append(line)
    return "\n".join(lines), sorted(set(by_id) - seen)


def _floors(m: dict) -> str:
    """Each floor's average beside the measurement, e.g. 'chance 0.00; random-weights 48.07; bow 52.33'."""
    floors = m.get("floors") or {}
    return "; ".join(f"{name} {_fmt(v.get('avg'))}" for name, v in floors.items()) or "—"


def _estimate(check: dict) -> str:
    """The check's numbers: difference [CI] for a relation; per-target agreement for a reproduces check."""
    details = [d for d in check.get("details") or [] if d.get("estimate") is not None]
    if not details:
        return "—"
    if check["type"] == "reproduces":
        ok = sum(d["outcome"] == "holds" for d in details)
        worst = max(details, key=lambda d: abs(d["difference"]))
        return f"{ok}/{len(details)} within ±{_fmt(worst['tolerance'])}; largest gap {worst['difference']:+.2f} ({worst['on']})"
    d = details[0]
    return f"{_fmt(d['estimate'])} [{_fmt(d['ci_low'])}, {_fmt(d['ci_high'])}]"


def markdown(verdicts: list[dict], tier: dict) -> str:
    lines = [f"# Claim report: tier `{tier['name']}`", "", tier.get("description", ""), ""]
    if tier.get("rehearsal"):
        lines += ["**Rehearsal.** Every asset is a stand-in with the real architecture's configuration and random "
                  "weights, on cut budgets: this report shows that the DAG runs, and no number or verdict in it means "
                  "anything about the claims.", ""]
    counts = {}
    for v in verdicts:
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    lines += ["**Summary:** " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), ""]
    lines += ["| claim | seed point | source | verdict | note |", "|---|---|---|---|---|"]
    for v in verdicts:
        expected = " (as expected)" if v.get("matches_expected") else " (unexpected)" if v.get("matches_expected") is False else ""
        data = f" **Unverified data** (not the release files): {', '.join(v['unverified_data'])}." if v.get("unverified_data") else ""
        note = f"{REHEARSAL}. {v['note']}" if v.get("rehearsal") else v["note"]
        lines.append(f"| `{v['id']}` | {v.get('seed_point') or 'harness'} | {_source(v)} | **{_verdict_word(v)}**{expected} | {note}{data} |")
    lines += ["", "## Measurements", "",
              "Scores are the protocol's metric x 100 on the average over the claim's benchmarks; brackets give the "
              f"{int(tier['bootstrap'].get('confidence', 0.95) * 100)}% paired-bootstrap interval over test items.", "",
              "Fine-tuning measurements give the spread over fine-tuning seeds and the trained / total parameters.", "",
              "Floors: the metric's chance score and the controls a relation crediting the measurement must beat "
              "(a relation whose credited side is not above all of them is inconclusive).", "",
              "| claim | measurement | reported | measured [CI] | floors | trained / total params | asset stands in for |",
              "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        for name, m in v["measurements"].items():
            measured = _measured(m) + (f" (degenerate: {', '.join(m['degenerate'])})" if m.get("degenerate") else "")
            measured += " (unverified data)" if m.get("unverified_data") else ""
            measured += f" ({REHEARSAL})" if v.get("rehearsal") else ""
            lines.append(f"| `{v['id']}` | {m.get('label', name)} | {_fmt(m.get('reported'))} | {measured} | "
                         f"{_floors(m)} | {_params(m)} | {m.get('substitute_for') or '—'} |")
        for name, c in v.get("controls", {}).items():
            lines.append(f"| `{v['id']}` | control: {name} cosine | — | {_fmt(c['avg']['measured'])} "
                         f"[{_fmt(c['avg']['ci_low'])}, {_fmt(c['avg']['ci_high'])}] | — | — | — |")
    lines += ["", "## Per benchmark", "", "Measured (reported) per benchmark, under each claim's aggregation.", ""]
    for v in verdicts:
        ran = {n: m for n, m in v["measurements"].items() if m.get("per_benchmark")}
        if not ran:
            continue
        bench = v["protocol"]["benchmarks"]
        lines += [f"`{v['id']}` ({_protocol_summary(v['protocol'])})", "", "| measurement | " + " | ".join(bench) + " |",
                  "|---" * (len(bench) + 1) + "|"]
        for name, m in ran.items():
            cells = []
            for b in bench:
                row = m["per_benchmark"].get(b)
                if row is None:  # a task the tier does not run (skip_tasks)
                    cells.append("not run")
                    continue
                rep = f" ({_fmt(row.get('reported'))})" if row.get("reported") is not None else ""
                cells.append(f"{_fmt(row['measured'])}{rep}")
            lines.append(f"| {m.get('label', name)} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += _curve_tables(verdicts)
    lines += _seed_tables(verdicts)
    lines += _training_tables(verdicts)
    lines += ["## Checks", "", "| claim | check | scope | outcome | estimate [CI] | reason |", "|---|---|---|---|---|---|"]
    for v in verdicts:
        for c in v["checks"]:
            est = _estimate(c)
            shown = c["outcome"] + (f" (measured: {c['measured_outcome']})" if c.get("measured_outcome") else "")
            lines.append(f"| `{v['id']}` | {c['description']} | {c['scope']} | {shown} | {est} | {c.get('reason', '')} |")
    notes = [(v["id"], v["tier_note"]) for v in verdicts if v.get("tier_note")]
    notes += [(v["id"], f"expected at this tier: {e['verdict']} — {e['note']}") for v in verdicts for e in v.get("expected", [])]
    if notes:
        lines += ["", "## Protocol notes for this tier", ""] + [f"- `{i}`: {n}" for i, n in notes]
    lines += ["", "## What a verdict at this tier means", "", tier.get("scope", "").strip(), ""]
    lines += [f"- **{k}**: {m}." for k, m in VERDICT_MEANING.items()]
    lines += ["", "Per-benchmark numbers, seeds, provenance and run paths are in `claims.json` and each run's `metrics.json`.", ""]
    return "\n".join(lines)


def _curves(verdicts: list[dict]) -> list[tuple[dict, str, dict, str]]:
    """(verdict, measurement name, measurement, target) for every curve measurement that ran, per target."""
    return [(v, n, m, t) for v in verdicts for n, m in v["measurements"].items() if m.get("curve")
            for t in v["protocol"]["benchmarks"] if t in m["curve"][0]["per_benchmark"]]


def _curve_tables(verdicts: list[dict]) -> list[str]:
    """One table per curve measurement: a row per target, a column per point, each cell measured (random-weights)."""
    items = _curves(verdicts)
    if not items:
        return []
    lines = ["## Curves", "", "Measurements along an axis (layers: 0 is the embeddings), per benchmark: measured "
             "(random-weights twin, where the claim has it). Drawn in `figures/curves.png`.", ""]
    done = set()
    for v, name, m, _ in items:
        if (v["id"], name) in done:
            continue
        done.add((v["id"], name))
        xs = [p["x"] for p in m["curve"]]
        lines += [f"`{v['id']}`: {m.get('label', name)}", "", "| benchmark | " + " | ".join(map(str, xs)) + " |",
                  "|---" * (len(xs) + 1) + "|"]
        for t in (t for vv, n, _, t in items if vv is v and n == name):
            cells = []
            for p in m["curve"]:
                rw = (p.get("floors") or {}).get("random-weights", {}).get(t)
                cells.append(_fmt(p["per_benchmark"][t]["measured"]) + (f" ({_fmt(rw)})" if rw is not None else ""))
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
        rc = m.get("reported_curve")
        if rc:
            span = f" of {rc['of']:g}" if rc.get("of") else ""
            for t, values in rc["values"].items():
                pts = ", ".join(f"{x:g}: {_fmt(y)}" for x, y in zip(rc["points"], values) if y is not None)
                lines.append("")
                lines.append(f"Reported on {t} (points{span}; {rc.get('source', 'the claim source')}): {pts}.")
        lines.append("")
    return lines


def reported_xy(rc: dict, t: str, tier_xs: list) -> tuple[list[float], list[float]]:
    """A reported curve's points on the tier's axis: with `of` (the source's depth or last step) a source point x is
    drawn at x / of of the tier's own span (layer 7 of 12 on a 4-layer model at 2.33), so the shapes line up;
    without it, at x itself (fractions of weights pruned mean the same on every model)."""
    pairs = [(x, y) for x, y in zip(rc["points"], rc["values"].get(t, [])) if y is not None]
    if rc.get("of"):
        lo, hi = min(tier_xs), max(tier_xs)
        pairs = [(lo + (hi - lo) * x / rc["of"], y) for x, y in pairs]
    return [x for x, _ in pairs], [y for _, y in pairs]


def _seed_tables(verdicts: list[dict]) -> list[str]:
    """Seed grids (Dodge et al.): per task the spread over the grid, the failed runs, and each seed's share of the
    grid's variance (two-way decomposition: head initialisation, data order, the rest)."""
    grids = [(v, n, m) for v in verdicts for n, m in v["measurements"].items() if m.get("seed_variance")]
    if not grids:
        return []
    lines = ["## Seed variance", "", "Each task's grid of fine-tuning runs that differ only in the head-initialisation "
             "seed and the data-order seed: mean and sd of the scores, the spread (max - min), the runs that failed "
             "(degenerate predictions), and the share of the grid's sum of squares each seed explains.", "",
             "| claim | task | grid (head x order) | mean | sd | spread | failed | head | order | rest |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v, _, m in grids:
        for task, g in m["seed_variance"].items():
            d = g.get("decomposition") or {}
            lines.append(f"| `{v['id']}` | {task} | {len(g['heads'])} x {len(g['orders'])} | {_fmt(g['mean'])} | "
                         f"{_fmt(g['sd'])} | {_fmt(g['spread'])} | {g['failed']}/{g['runs']} | {_fmt(d.get('head'))} | "
                         f"{_fmt(d.get('order'))} | {_fmt(d.get('residual'))} |")
    return lines + [""]


def _training_tables(verdicts: list[dict]) -> list[str]:
    """The budget of every measurement that trained its encoder here (the contrastive objectives): per run, the steps,
    batch, length and learning rate, the sentences it saw, the step whose STS-B dev score chose its checkpoint, and
    its speed; the random-weights control trains with the same budget."""
    runs = [(v, name, m) for v in verdicts for name, m in v.get("measurements", {}).items() if m.get("training")]
    if not runs:
        return []
    lines = ["## Training budgets", "", "Each measurement trained here, run by run (its random-weights control trains "
             "with the same budget): steps x batch at a length, the learning rate, the sentences seen, the step whose "
             "STS-B dev Spearman chose the checkpoint (x100), steps per second and peak memory (CPU: resident set).", "",
             "| claim | measurement | run | steps x batch, length | lr | sentences seen | chosen step (dev) | steps/s | peak MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for v, name, m in runs:
        for t in m["training"]:
            lines.append(f"| `{v['id']}` | {m.get('label') or name} | {t['instance']} s{t['seed']} | "
                         f"{t['steps']} x {t['batch_size']}, {t['max_length']} | {t['lr']:g} | {t['sentences_seen']} | "
                         f"{t['best_step']} ({_fmt(t['best_dev'])}) | {_fmt(t['steps_per_second'])} | "
                         f"{_fmt(t['peak_memory_mb'], 0)} |")
    return lines + [""]


def curves_plot(verdicts: list[dict], out: Path) -> None:
    """Each curve measurement on each benchmark: measured with its 95% interval, the random-weights twin dashed and
    chance dotted, one panel per (claim, measurement, benchmark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = _curves(verdicts)
    cols = min(3, max(len(items), 1))
    rows_ = max(1, -(-len(items) // cols))
    fig, axes = plt.subplots(rows_, cols, figsize=(5.2 * cols, 3.8 * rows_), squeeze=False)
    for ax in axes.flat[len(items):]:
        ax.axis("off")
    if not items:
        axes[0][0].text(0.5, 0.5, "no curve measurement ran", ha="center", transform=axes[0][0].transAxes)
    for ax, (v, name, m, t) in zip(axes.flat, items):
        xs = [p["x"] for p in m["curve"]]
        row = [p["per_benchmark"][t] for p in m["curve"]]
        num = lambda vals: [math.nan if v is None else v for v in vals]  # noqa: E731  (a degenerate point: a gap)
        ax.plot(xs, num(r["measured"] for r in row), "o-", color="C0", label="measured (95% CI)")
        ax.fill_between(xs, num(r["ci_low"] for r in row), num(r["ci_high"] for r in row), color="C0", alpha=0.2)
        if m.get("reported_curve") and t in m["reported_curve"]["values"]:
            rx, ry = reported_xy(m["reported_curve"], t, xs)
            scaled = " (source's depth rescaled)" if m["reported_curve"].get("of") else ""
            ax.plot(rx, ry, "x-", color="0.55", lw=1, label="reported" + scaled)
        for floor, style, colour in (("random-weights", "--", "C1"), ("chance", ":", "0.4")):
            ys = [(p.get("floors") or {}).get(floor, {}).get(t) for p in m["curve"]]
            if any(y is not None for y in ys):
                ax.plot(xs, num(ys), style, color=colour, label=floor)
        if len(xs) <= 25:
            ax.set_xticks(xs)
        ax.set_title(f"{v['id'].split('/')[-1]}: {t}", fontsize=9)
        ax.set_xlabel("layer" if v["protocol"]["family"] in ("probing", "intrinsic") else "point")
        ax.set_ylabel(f"{v['protocol']['metric']} x {v['protocol'].get('scale', 100):g}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, out)


# what each panel of the training figure plots from a run's history: (key, title, axis label, scale)
TRAINING_PANELS = (("stsb_dev_spearman", "checkpoint selection on STS-B dev (one line per run)",
                    "STS-B dev Spearman x 100", 100.0),
                   ("uniformity", "uniformity of the dev vectors", "uniformity (log E exp(-2d^2); lower: more spread)", 1.0),
                   ("alignment", "alignment of the dev paraphrases", "alignment (gold > 4 pairs, E d^2; lower: closer)", 1.0))


def training_plot(verdicts: list[dict], out: Path) -> dict[str, int]:
    """The contrastive runs the verdicts read, over training steps: STS-B dev Spearman (checkpoint selection) and the
    uniformity and alignment of the dev vectors (SimCSE section 5), one colour per objective (its seeds as thin
    lines), the same training from random weights dashed. Read from each run's metrics.json history; a run that
    predates a measure has no line in its panel. Returns the number of runs drawn per panel (its history key)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = sorted({p for v in verdicts if v.get("protocol", {}).get("family") == "contrastive"
                    for p in v.get("runs", []) if "/runs/contrastive/" in p and Path(p).exists()})
    fig, axes = plt.subplots(1, len(TRAINING_PANELS), figsize=(15, 4.5))
    colours: dict[str, str] = {}
    drawn = {key: 0 for key, *_ in TRAINING_PANELS}
    for p in paths:
        values = json.loads(Path(p).read_text())["values"]
        history = values.get("history") or []
        if len(history) < 2:  # a released checkpoint evaluated without training: no curve
            continue
        method = p.split("/runs/contrastive/")[1].split("/")[1]
        colour = colours.setdefault(method, f"C{len(colours) % 10}")
        style = "--" if values.get("random_weights") else "-"
        for ax, (key, _, _, scale) in zip(axes, TRAINING_PANELS):
            points = [(h["step"], scale * h[key]) for h in history if key in h]
            if len(points) >= 2:
                ax.plot(*zip(*points), style, color=colour, lw=1, alpha=0.8)
                drawn[key] += 1
    for method, colour in colours.items():
        axes[0].plot([], [], "-", color=colour, label=method)
    if colours:
        axes[0].plot([], [], "--", color="0.4", label="from random weights")
        axes[0].legend(fontsize=7, ncol=2)
    for ax, (key, title, label, _) in zip(axes, TRAINING_PANELS):
        if not drawn[key]:
            ax.text(0.5, 0.5, "no run recorded this" if colours else "no contrastive training ran", ha="center",
                    transform=ax.transAxes)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("training step")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, out)
    return drawn


def _protocol_summary(proto: dict) -> str:
    if proto["family"] == "sts":
        return f"{proto.get('evaluator', 'senteval')}, {proto.get('aggregation', 'all')}, {proto.get('text_form', '')} text"
    metrics = proto.get("task_metrics", {})
    per = ", ".join(f"{b} {metrics.get(b, proto['metric'])}" for b in proto["benchmarks"])
    return f"{proto.get('evaluator', '')} on {proto['split']}: {per}"


def params_plot(verdicts: list[dict], out: Path) -> None:
    """Quality against trained parameters (log axis), one colour per method, one panel per training family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(v, m) for v in verdicts for m in v["measurements"].values()
              if m.get("measured") is not None and m.get("trained_params") is not None]
    families = sorted({v["protocol"]["family"] for v, _ in points}) or ["glue"]
    fig, axes = plt.subplots(1, len(families), figsize=(6.5 * len(families), 4.6), squeeze=False)
    methods = sorted({m["method"] for _, m in points})
    colours = {meth: f"C{i}" for i, meth in enumerate(methods)}
    for ax, family in zip(axes[0], families):
        seen = set()
        for v, m in points:
            if v["protocol"]["family"] != family:
                continue
            x = max(m["trained_params"], 1.0)  # zero-shot trains nothing: drawn at 1 on the log axis
            seeds = m.get("seeds") or [m["measured"]]
            ax.errorbar(x, m["measured"], yerr=[[m["measured"] - min(seeds)], [max(seeds) - m["measured"]]], fmt="o",
                        color=colours[m["method"]], capsize=3, label=m["method"] if m["method"] not in seen else None)
            seen.add(m["method"])
            ax.annotate(", ".join(m.get("instances", [])), (x, m["measured"]), fontsize=6, alpha=0.7,
                        xytext=(4, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("trained parameters (log scale)")
        ax.set_ylabel("average dev score x 100 (mean of seeds; bars: seed range)")
        ax.set_title(f"{family}: quality vs trained parameters")
        ax.grid(alpha=0.3)
        if seen:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no fine-tuning measurement ran", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    _save(fig, out)


def _save(fig, out: Path) -> None:
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(out)


FLOOR_MARKERS = {"chance": ("|", "0.4"), "random-weights": ("s", "C1"), "bow": ("^", "C2"), "tfidf": ("v", "C4")}


def forest_plot(verdicts: list[dict], out: Path) -> None:
    """Measured (95% CI) and reported per measurement, with every floor it must beat drawn on its row."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = [("\n".join(textwrap.wrap(f"{v['id'].split('/')[-1]}: {m.get('label', n)}", 48)), m)
             for v in verdicts for n, m in v["measurements"].items() if m.get("measured") is not None]
    height = 0.5 * max(len(items), 2) + 2.2  # inches: 0.5 per row, 1.6 below the axes (label, legend), 0.6 above
    fig = plt.figure(figsize=(12, height))
    # fixed margins: the labels get the left 40%, the legend sits below the axes and covers no point
    ax = fig.add_axes([0.4, 1.6 / height, 0.57, 1 - 2.2 / height])
    seen = set()

    def once(key: str) -> str | None:
        if key in seen:
            return None
        seen.add(key)
        return key

    for y, (label, m) in enumerate(reversed(items)):
        ax.errorbar(m["measured"], y, xerr=[[m["measured"] - m["ci_low"]], [m["ci_high"] - m["measured"]]], fmt="o",
                    color="C0", label=once("measured (95% CI)"))
        if m.get("reported") is not None:
            ax.plot(m["reported"], y, "x", color="C3", markersize=8, label=once("reported"))
        for name, floor in (m.get("floors") or {}).items():
            if floor.get("avg") is None:
                continue
            marker, colour = FLOOR_MARKERS.get(name, ("D", "C7"))
            ax.plot(floor["avg"], y, marker, color=colour, markersize=7, alpha=0.8, markerfacecolor="none",
                    label=once(f"floor: {name}" if name in FLOOR_MARKERS else "floor: other measurement"))
    ax.set_yticks(range(len(items)), [label for label, _ in reversed(items)], fontsize=7)
    ax.set_ylim(-0.6, len(items) - 0.4)
    ax.set_xlabel("score x 100 (average over benchmarks)")
    ax.set_title("Reported vs measured, with each measurement's floors")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.6 / (height - 2.2)), fontsize=8, ncol=4, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    _save(fig, out)


def write(verdict_files: list[Path], tier: dict, out_dir: Path) -> None:
    write_verdicts([json.loads(Path(p).read_text()) for p in verdict_files], tier, out_dir)


# the files write_verdicts writes under the report folder
OWN_FILES = ("claims.json", "claims.csv", "claims.md", "provenance.json", "figures/forest.png",
             "figures/quality-vs-params.png", "figures/curves.png", "figures/contrastive-training.png")


def write_verdicts(verdicts: list[dict], tier: dict, out_dir: Path) -> None:
    """claims.json, claims.csv, claims.md and the figures from verdict rows (files, or error rows of failed claims)."""
    verdicts = sorted(verdicts, key=lambda v: v["id"])
    # the checkout as it was before this report rewrote its own files: once they are tracked (the published micro
    # report), writing them first would mark every regenerated report '+dirty'
    prov = provenance(verdicts, tier, own_files=[out_dir / f for f in OWN_FILES])
    atomic_write_json(out_dir / "claims.json", verdicts)
    buf = io.StringIO()
    table = rows(verdicts)
    writer = csv.DictWriter(buf, fieldnames=list(table[0]) if table else ["claim"])
    writer.writeheader()
    writer.writerows(table)
    atomic_write_text(out_dir / "claims.csv", buf.getvalue())
    atomic_write_text(out_dir / "claims.md", markdown(verdicts, tier))
    forest_plot(verdicts, out_dir / "figures" / "forest.png")
    params_plot(verdicts, out_dir / "figures" / "quality-vs-params.png")
    curves_plot(verdicts, out_dir / "figures" / "curves.png")
    training_plot(verdicts, out_dir / "figures" / "contrastive-training.png")
    atomic_write_json(out_dir / "provenance.json", prov)


def provenance(verdicts: list[dict], tier: dict, own_files: list[Path] = ()) -> dict:
    """What produced this report: the commit and package versions that wrote it, the claims it covers, and the
    commits and versions of every run its verdicts read (a published report names them; tests check they are real)."""
    from .provenance import git_commit, package_versions

    commits: dict[str, int] = {}
    packages: dict[str, set] = {}
    for v in verdicts:
        rp = v.get("runs_provenance") or {}
        for c, n in rp.get("commits", {}).items():
            commits[c] = commits.get(c, 0) + n
        for name, versions in rp.get("packages", {}).items():
            packages.setdefault(name, set()).update(versions)
    return {"tier": tier["name"], "commit": git_commit(tuple(own_files)), "packages": package_versions(),
            "claims": {v["id"]: v.get("version") for v in verdicts},
            "verdict_commits": sorted({(v.get("provenance") or {}).get("git_commit", "unknown") for v in verdicts}),
            "run_commits": dict(sorted(commits.items())),
            "run_packages": {n: sorted(vs) for n, vs in sorted(packages.items())}}
