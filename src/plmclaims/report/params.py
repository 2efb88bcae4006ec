"""quality-vs-params.png: quality against trained parameters, one panel per claim that fine-tunes. Each method that
trains parameters is a point at its trained count (log axis; bars: the seed range); full fine-tuning is also a line
across the panel (the reference the claims compare with), zero-shot a line (it trains nothing, so it has no place on
a log axis), chance a dotted line; a measurement without a score is named in the panel with the reason."""
from __future__ import annotations

from pathlib import Path

from .common import all_measurements, asset_of, scored_seeds, views
from .plotting import FLOORS, legend_once, panel_grid, save, shared_legend, value_axis, wrap


def _claims(verdicts: list[dict]) -> list[tuple[dict, list[tuple[str, dict]]]]:
    """(verdict, [(name, measurement)]) for each claim with a measurement that counts its trained parameters."""
    out = []
    for v in verdicts:
        several = len(views(v)) > 1
        ms = [(f"{name} [{role}]" if several and role else name, m) for role, name, m in all_measurements(v)
              if m.get("trained_params") is not None]
        if ms:
            out.append((v, ms))
    return out


def _missing(name: str, m: dict) -> str:
    if m.get("degenerate"):
        return f"{name} ({m.get('method', '')}): no score, degenerate on {', '.join(m['degenerate'])}"
    return f"{name} ({m.get('method', '')}): not run" + (f", {m['reason']}" if m.get("reason") else "")


def _panel(ax, v: dict, ms: list[tuple[str, dict]], colours: dict, once) -> None:
    missing, chance = [], set()
    for name, m in ms:
        c = ((m.get("floors") or {}).get("chance") or {}).get("avg")
        if c is not None:
            chance.add(round(c, 6))
        if m.get("measured") is None:  # marked at its trained count on the axis's floor, and named below the panel
            missing.append(_missing(name, m))
            if m["trained_params"]:
                ax.plot(m["trained_params"], 0.02, "X", color="C3", markersize=7, transform=ax.get_xaxis_transform(),
                        label=once("no score (named below the panel)"), gid="missing", clip_on=False)
                ax.annotate(name, (m["trained_params"], 0.02), xycoords=("data", "axes fraction"), fontsize=6,
                            color="C3", xytext=(4, 2), textcoords="offset points")
            continue
        colour = colours.setdefault(m.get("method", name), f"C{len(colours) % 10}")
        if not m["trained_params"]:  # zero-shot trains nothing: a reference line, not a point at 10^0
            ax.axhline(m["measured"], color=colour, ls="--", lw=1.2,
                       label=once(f"{m.get('method', name)} (trains nothing)"), gid="zero-shot")
            ax.annotate(f"{name} {m['measured']:.1f}", (0.01, m["measured"]), xycoords=("axes fraction", "data"),
                        fontsize=6, va="bottom")
            continue
        if m.get("method") == "full-finetuning":  # the reference the methods are compared with
            ax.axhline(m["measured"], color=colour, lw=0.8, alpha=0.7, gid="full-finetuning")
        seeds = scored_seeds(m) or [m["measured"]]
        spread = [[m["measured"] - min(seeds)], [max(seeds) - m["measured"]]]
        ax.errorbar(m["trained_params"], m["measured"], yerr=spread, fmt="o", color=colour, capsize=3,
                    label=once(m.get("method", name)), gid="measured")
        assets = sorted({asset_of(i) for i in m.get("instances") or []})
        ax.annotate(f"{name}: {', '.join(assets)}", (m["trained_params"], m["measured"]), fontsize=6, alpha=0.8,
                    xytext=(4, 3), textcoords="offset points")
    for c in sorted(chance):
        ax.axhline(c, color=FLOORS["chance"][1], ls=":", lw=1, label=once("chance"), gid="floor:chance")
    full = [m for _, m in ms if m.get("method") == "full-finetuning"]
    if full and all(m.get("measured") is None for m in full):
        missing.append("so the claim's full fine-tuning reference has no score")
    if missing:
        ax.text(0.0, -0.2, wrap("; ".join(missing), 95), transform=ax.transAxes, fontsize=6.5, color="C3", va="top",
                gid="missing")
    ax.set_xscale("log")
    trained = [m["trained_params"] for _, m in ms if m["trained_params"]]
    if trained:
        ax.set_xlim(min(trained) / 3, max(trained) * 3)
    ax.set_xlabel("trained parameters (log scale)", fontsize=8)
    ax.set_ylabel(f"{value_axis(v)} (mean of seeds; bars: seed range)", fontsize=7)
    ax.set_title(f"{v['id']}: {v.get('verdict', '')}", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


def params_figure(verdicts: list[dict]):
    claims = _claims(verdicts)
    fig, axes = panel_grid(len(claims), 6.0, 4.4, "no fine-tuning measurement ran")
    colours: dict[str, str] = {}
    once = legend_once()
    for ax, (v, ms) in zip(axes, claims):
        _panel(ax, v, ms, colours, once)
    shared_legend(fig)
    return fig


def params_plot(verdicts: list[dict], out: Path) -> None:
    save(params_figure(verdicts), out)
