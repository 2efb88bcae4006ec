"""The report's tables: the flat rows of claims.csv and the Markdown tables of claims.md (measurements, per
benchmark, curves, seed grids, training budgets, checks), each over every model a claim was measured on."""
from __future__ import annotations

from .common import (REHEARSAL, all_measurements, count, floors_text, fmt, label, scored_seeds, source, verdict_word,
                     views)


def _measured(m: dict) -> str:
    if m.get("curve"):
        return f"a curve of {len(m['curve'])} points (see Curves)"
    if m.get("measured") is None:
        return "not run" if not m.get("degenerate") else "no score"
    seeds = scored_seeds(m)
    spread = f", {len(seeds)} seeds {min(seeds):.1f}–{max(seeds):.1f}" if len(seeds) > 1 else ""
    return f"{fmt(m['measured'])} [{fmt(m['ci_low'])}, {fmt(m['ci_high'])}]{spread}"


def _params(m: dict) -> str:
    """Trained / total parameters of a fine-tuning measurement, e.g. '74.5K / 22.8M (0.33%)'."""
    if m.get("trained_params") is None or not m.get("total_params"):
        return "—"
    return f"{count(m['trained_params'])} / {count(m['total_params'])} ({100 * m['trained_fraction']:.2f}%)"


def rows(verdicts: list[dict]) -> list[dict]:
    """One row per (claim, model, measurement): the flat form of the report (CSV)."""
    out = []
    for v in verdicts:
        several = len(views(v)) > 1
        model_verdicts = {role: view.get("verdict") for role, view in views(v)}
        for role, name, m in all_measurements(v):
            row = {"claim": v["id"], "seed_point": v.get("seed_point", ""), "tier": v["tier"], "verdict": verdict_word(v),
                   "source": source(v), "measurement": name, "label": m.get("label", name),
                   "reported": m.get("reported"), "measured": m.get("measured"), "ci_low": m.get("ci_low"),
                   "ci_high": m.get("ci_high"), "substitute_for": m.get("substitute_for", ""),
                   "random_weights": (m.get("random_weights") or {}).get("measured"), "floors": floors_text(m),
                   "trained_params": m.get("trained_params"), "total_params": m.get("total_params"),
                   "peak_memory_mb": m.get("peak_memory_mb"),
                   "unverified_data": ";".join(m.get("unverified_data", [])),
                   "note": "; ".join(x for x in (REHEARSAL if v.get("rehearsal") else "", m.get("reason", "")) if x)}
            if several:  # the columns a claim measured on one model does not need
                row.update(model=role or "", model_verdict=model_verdicts.get(role) or "")
            if v.get("outdated"):  # a published verdict the current claims or tier would compute anew
                row["outdated"] = v["outdated"]
            out.append(row)
    return out


def measurement_table(verdicts: list[dict], tier: dict) -> list[str]:
    lines = ["## Measurements", "",
             "Scores are the protocol's metric x 100 on the average over the claim's benchmarks; brackets give the "
             f"{int(tier['bootstrap'].get('confidence', 0.95) * 100)}% paired-bootstrap interval over test items.", "",
             "Fine-tuning measurements give the spread over fine-tuning seeds and the trained / total parameters.", "",
             "Floors: the metric's chance score and the controls a relation crediting the measurement must beat "
             "(a relation whose credited side is not above all of them is inconclusive).", "",
             "| claim | measurement | reported | measured [CI] | floors | trained / total params | "
             "asset stands in for |",
             "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        several = len(views(v)) > 1
        for role, name, m in all_measurements(v):
            measured = _measured(m) + (f" (degenerate: {', '.join(m['degenerate'])})" if m.get("degenerate") else "")
            measured += " (unverified data)" if m.get("unverified_data") else ""
            measured += f" ({REHEARSAL})" if v.get("rehearsal") else ""
            lines.append(f"| `{v['id']}` | {label(m, name, role, several)} | {fmt(m.get('reported'))} | {measured} | "
                         f"{floors_text(m)} | {_params(m)} | {m.get('substitute_for') or '—'} |")
        for name, c in v.get("controls", {}).items():
            lines.append(f"| `{v['id']}` | control: {name} cosine | — | {fmt(c['avg']['measured'])} "
                         f"[{fmt(c['avg']['ci_low'])}, {fmt(c['avg']['ci_high'])}] | — | — | — |")
    return lines


def _protocol_summary(proto: dict) -> str:
    if proto["family"] == "sts":
        return (f"{proto.get('evaluator', 'senteval')}, {proto.get('aggregation', 'all')}, "
                f"{proto.get('text_form', '')} text")
    metrics = proto.get("task_metrics", {})
    per = ", ".join(f"{b} {metrics.get(b, proto['metric'])}" for b in proto["benchmarks"])
    return f"{proto.get('evaluator', '')} on {proto['split']}: {per}"


def per_benchmark_tables(verdicts: list[dict]) -> list[str]:
    lines = ["## Per benchmark", "", "Measured (reported) per benchmark, under each claim's aggregation.", ""]
    for v in verdicts:
        several = len(views(v)) > 1
        ran = [(role, n, m) for role, n, m in all_measurements(v) if m.get("per_benchmark")]
        if not ran:
            continue
        bench = v["protocol"]["benchmarks"]
        lines += [f"`{v['id']}` ({_protocol_summary(v['protocol'])})", "",
                  "| measurement | " + " | ".join(bench) + " |", "|---" * (len(bench) + 1) + "|"]
        for role, name, m in ran:
            cells = []
            for b in bench:
                row = m["per_benchmark"].get(b)
                if row is None:  # a task the tier does not run (skip_tasks)
                    cells.append("not run")
                    continue
                rep = f" ({fmt(row.get('reported'))})" if row.get("reported") is not None else ""
                cells.append(f"{fmt(row['measured'])}{rep}")
            lines.append(f"| {label(m, name, role, several)} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def curves(verdicts: list[dict]) -> list[tuple[dict, str, dict, str]]:
    """(verdict, measurement name, measurement, target) for every curve measurement that ran, per target, over every
    model of each verdict (the name carries the model role when a claim was measured on several)."""
    out = []
    for v in verdicts:
        several = len(views(v)) > 1
        for role, n, m in all_measurements(v):
            if m.get("curve"):
                name = f"{n} [{role}]" if several and role else n
                out += [(v, name, m, t) for t in v["protocol"]["benchmarks"] if t in m["curve"][0]["per_benchmark"]]
    return out


def curve_tables(verdicts: list[dict], figure: str = "") -> list[str]:
    """One table per curve measurement: a row per target, a column per point, each cell measured (random-weights)."""
    items = curves(verdicts)
    if not items:
        return []
    lines = ["## Curves", "", "Measurements along an axis (layers: 0 is the embeddings), per benchmark: measured "
             "(random-weights twin, where the claim has it).", ""] + ([figure, ""] if figure else [])
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
                cells.append(fmt(p["per_benchmark"][t]["measured"]) + (f" ({fmt(rw)})" if rw is not None else ""))
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
        rc = m.get("reported_curve")
        if rc:
            span = f" of {rc['of']:g}" if rc.get("of") else ""
            for t, values in rc["values"].items():
                pts = ", ".join(f"{x:g}: {fmt(y)}" for x, y in zip(rc["points"], values) if y is not None)
                lines.append("")
                lines.append(f"Reported on {t} (points{span}; {rc.get('source', 'the claim source')}): {pts}.")
        lines.append("")
    return lines


def seed_tables(verdicts: list[dict]) -> list[str]:
    """Seed grids (Dodge et al.): per task the spread over the grid, the failed runs, and each seed's share of the
    grid's variance (two-way decomposition: head initialisation, data order, the rest)."""
    grids = [(v, n, m) for v in verdicts for _, n, m in all_measurements(v) if m.get("seed_variance")]
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
            lines.append(f"| `{v['id']}` | {task} | {len(g['heads'])} x {len(g['orders'])} | {fmt(g['mean'])} | "
                         f"{fmt(g['sd'])} | {fmt(g['spread'])} | {g['failed']}/{g['runs']} | {fmt(d.get('head'))} | "
                         f"{fmt(d.get('order'))} | {fmt(d.get('residual'))} |")
    return lines + [""]


def training_tables(verdicts: list[dict], figure: str = "") -> list[str]:
    """The budget of every measurement that trained its encoder here (the contrastive objectives): per run, the steps,
    batch, length and learning rate, the sentences it saw, the step whose STS-B dev score chose its checkpoint, and
    its speed; the random-weights control trains with the same budget."""
    runs = [(v, name, m) for v in verdicts for _, name, m in all_measurements(v) if m.get("training")]
    if not runs:  # the figure still has its place: it reads the runs' histories, not these records
        return ["## Training", "", figure, ""] if figure else []
    lines = ["## Training budgets", "", "Each measurement trained here, run by run (its random-weights control trains "
             "with the same budget): steps x batch at a length, the learning rate, the sentences seen, the step whose "
             "STS-B dev Spearman chose the checkpoint (x100), steps per second and peak memory (CPU: resident set).",
             ""]
    lines += [figure, ""] if figure else []
    lines += ["| claim | measurement | run | steps x batch, length | lr | sentences seen | chosen step (dev) | "
              "steps/s | peak MB |", "|---|---|---|---|---|---|---|---|---|"]
    for v, name, m in runs:
        for t in m["training"]:
            lines.append(f"| `{v['id']}` | {m.get('label') or name} | {t['instance']} s{t['seed']} | "
                         f"{t['steps']} x {t['batch_size']}, {t['max_length']} | {t['lr']:g} | {t['sentences_seen']} | "
                         f"{t['best_step']} ({fmt(t['best_dev'])}) | {fmt(t['steps_per_second'])} | "
                         f"{fmt(t['peak_memory_mb'], 0)} |")
    return lines + [""]


def _estimate(check: dict) -> str:
    """The check's numbers: difference [CI] for a relation; per-target agreement for a reproduces check."""
    details = [d for d in check.get("details") or [] if d.get("estimate") is not None]
    if not details:
        return "—"
    if check["type"] == "reproduces":
        ok = sum(d["outcome"] == "holds" for d in details)
        worst = max(details, key=lambda d: abs(d["difference"]))
        return (f"{ok}/{len(details)} within ±{fmt(worst['tolerance'])}; "
                f"largest gap {worst['difference']:+.2f} ({worst['on']})")
    d = details[0]
    return f"{fmt(d['estimate'])} [{fmt(d['ci_low'])}, {fmt(d['ci_high'])}]"


def checks_table(verdicts: list[dict]) -> list[str]:
    lines = ["## Checks", "", "`shown`: measured and shown with its measured outcome, not judged at this tier.", "",
             "| claim | check | scope | outcome | estimate [CI] | reason |", "|---|---|---|---|---|---|"]
    for v in verdicts:
        several = len(views(v)) > 1
        for role, view in views(v):
            on = f" [{role}]" if several and role else ""
            for c in view.get("checks") or []:
                shown = c["outcome"] + (f" (measured: {c['measured_outcome']})" if c.get("measured_outcome") else "")
                lines.append(f"| `{v['id']}` | {c['description']}{on} | {c['scope']} | {shown} | {_estimate(c)} | "
                             f"{c.get('reason', '')} |")
    return lines
