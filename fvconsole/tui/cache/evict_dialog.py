"""The shard cache's eviction dialog: the cap, free-space target and force controls, with a live preview.

``e`` (marked), ``i`` (invalid), ``c`` (to the cap) and ``f`` (to a free-space target) open it.
The free-space fields are ``cache evict --min-free-percent/--min-free-gb``: in any of the
dialogs they add entries in GC order until the filesystem would have that much free (the
union, as on the command line), and the preview says honestly whether the target is reachable. A target that
cannot be reached evicts nothing for itself (as ``cache evict`` without ``--best-effort``): the preview says
so, and *best effort* evicts what may go toward it anyway. It plans on the scan the view
already holds (``plan_eviction`` is pure), so every change of the cap or of *force* shows at
once what would be evicted, what is skipped and why, and the usage bar after the eviction.
Continuing hands back the chosen ``EvictOptions`` (``tui/messages.py``); the view then rescans, plans again and
asks in the console's one confirmation dialog (focus on Cancel) before anything is deleted.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Checkbox, Input, Label

from fvconsole.core.cache import (
    CacheScan,
    EvictionPlan,
    EvictionSelectors,
    FreeTarget,
    cap_bytes,
    parse_max_gb,
    parse_min_free_gb,
    parse_min_free_percent,
    plan_eviction,
)
from fvconsole.core.shared import FvError, elided, head_tail, human_bytes, plural
from fvconsole.tui import state
from fvconsole.tui.base import describe_error
from fvconsole.tui.messages import EvictOptions, EvictSelection
from fvconsole.tui.modals import Dialog
from fvconsole.tui.plain import PlainText, one_line
from fvconsole.tui.widgets.inputs import TickBox
from fvconsole.tui.widgets.progress import UsageBar
from fvconsole.tui.widgets.statics import FitStatic
from fvconsole.tui.wording import evict_reason_text, free_space_text, skip_text

#: How often the preview is planned again (ages and "in use" move on).
PREVIEW_TICK = 2.0


def plan_for(scan: CacheScan, options: EvictOptions, now: float | None = None) -> EvictionPlan:
    """``plan_eviction`` for the dialog's choices (pure: the scan is in memory)."""
    return plan_eviction(scan, options.selectors, force=options.force, now=now)


def free_space_line(plan: EvictionPlan) -> PlainText:
    """The plan's free-space target line (``FreeSpacePlan.why``, as ``cache evict`` prints it but
    the target named by the dialog's fields); empty without a target."""
    free = plan.free_space
    if free is None:
        return PlainText()
    style = "bold green" if free.reached else "bold red"
    mark = "✓" if free.reached else "✗"
    return PlainText(f"{mark} {free_space_text(free)}\n", style=style)


def _entry_lines(text: PlainText, cells: str, reason: str, width: int, style: str = "") -> None:
    """``cells`` then ``reason``, the reason wrapped under itself (never back to column 1)."""
    import textwrap

    indent = cell_len(cells)
    room = max(width - indent, 20)
    lines = textwrap.wrap(reason, room, break_on_hyphens=False) or [""]
    text.append(cells + lines[0] + "\n", style=style)
    for line in lines[1:]:
        text.append(" " * indent + line + "\n", style=style)


def preview_text(scan: CacheScan, plan: EvictionPlan, now: float, limit: int = 8, width: int = 76) -> PlainText:
    """What would be evicted and what is left in place (worded with the console's controls),
    built for ``width`` cells: a long reason wraps under the reason column."""
    text = free_space_line(plan)
    text.append(f"{len(plan.evict)} to evict, frees {human_bytes(plan.freed_bytes)}\n",
                style="bold red" if plan.evict else "bold")
    head, omitted, tail = head_tail(list(plan.evict), limit, 2)
    for p in head + tail:
        _entry_lines(text, f"  {p.key} {human_bytes(p.bytes):>10}  ", evict_reason_text(p), width)
    if omitted:
        text.append(f"  … {omitted} more\n")
    if plan.skipped:
        text.append(f"{len(plan.skipped)} left in place:\n", style="yellow")
        for skipped in list(plan.skipped)[:limit]:
            line = skip_text(skipped.why, scan.get(skipped.key), now, plan.grace_seconds)
            _entry_lines(text, f"  {skipped.key}  ", line, width, style="yellow")
        if len(plan.skipped) > limit:
            text.append(f"  … {len(plan.skipped) - limit} more\n", style="yellow")
    return text


class EvictScreen(Dialog["EvictOptions | None"]):
    """Cap and force for one eviction, with the plan they give, before the confirmation."""

    AUTO_FOCUS = ""  # set in on_mount: the cap field for "to cap", else Continue when there is something to evict
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, scan: CacheScan, selection: EvictSelection, cap_gb: float) -> None:
        super().__init__()
        self._scan = scan
        self._selection = selection
        self._cap_gb = cap_gb
        # The cap selects only in "to cap": elsewhere it is noise, and not shown.
        self._cap = Input(f"{cap_gb:g}", id="evict-cap", type="number", compact=True) if selection.to_cap else None
        self._force = TickBox("force: also evict entries that look in use", id="evict-force", compact=True)
        self._free_pct = Input(id="evict-free-pct", type="number", compact=True, placeholder="-")
        self._free_gb = Input(id="evict-free-gb", type="number", compact=True, placeholder="-")
        self._best = TickBox("best effort", id="evict-best-effort", compact=True)
        self._usage = UsageBar(id="evict-usage")
        self._preview = FitStatic(id="evict-preview")
        self._go = Button("Continue…", variant="error", id="evict-continue", compact=True)
        self._cancel = Button("Cancel", variant="primary", id="cancel", compact=True)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="evict"):
            with Vertical(id="dialog-head"):
                yield Label(PlainText(self._selection.what.capitalize()), id="dialog-title")
                with Horizontal(id="evict-controls"):
                    if self._cap is not None:
                        yield Label("cap (GiB)", id="evict-cap-label")
                        yield self._cap
                    yield self._force
                with Horizontal(id="evict-free"):
                    yield Label("min free", classes="evict-free-label")
                    yield self._free_pct
                    yield Label("% of the filesystem, or", classes="evict-free-label")
                    yield self._free_gb
                    yield Label("GiB", classes="evict-free-label")
                    yield self._best
                yield self._usage
            with VerticalScroll(id="dialog-body"):
                yield self._preview
            with Horizontal(id="dialog-buttons"):
                yield self._go
                yield self._cancel

    def on_mount(self) -> None:
        self._update()
        self.set_interval(PREVIEW_TICK, self._update)
        first = self._cap if self._selection.to_cap else self._free_pct if self._selection.to_free else None
        for widget in (first, self._go, self._cancel):
            if widget is not None and not widget.disabled:
                widget.focus()
                break

    def options(self) -> EvictOptions:
        """The dialog's choices; FvError when the cap is not a usable number."""
        sel = self._selection
        cap = None
        if self._cap is not None:
            cap = parse_max_gb(self._cap.value.strip(), flag="cap")
        pct = self._free_pct.value.strip()
        gib = self._free_gb.value.strip()
        target = None
        if pct or gib:
            target = FreeTarget(parse_min_free_gb(gib, "min free (GiB)") if gib else None,
                                parse_min_free_percent(pct, "min free (%)") if pct else None, self._best.value)
        elif sel.to_free:
            raise FvError("set a free-space target: min free, in % of the filesystem or in GiB")
        picked = EvictionSelectors(max_gb=cap, keys=sel.keys, invalid=sel.invalid, free_target=target)
        return EvictOptions(sel, picked, self._force.value)

    def _update(self) -> None:
        now = state.now()
        try:
            options = self.options()
            plan = plan_for(state.shown_scan(self._scan), options, now=now)
        except FvError as exc:
            self._preview.update(PlainText(f"✗ {describe_error(exc)}", style="bold red"))
            self._usage.clear()
            self._go.disabled = True
            return
        picked = options.selectors.max_gb
        cap = cap_bytes(picked if picked is not None else self._cap_gb)
        fs_free, fs_total = state.free_space(self._scan)
        self._usage.show_usage(plan.total_bytes, int(cap), fs_free, fs_total, after=plan.total_bytes_after,
                               fs_free_after=plan.fs_free_after)
        scan = self._scan
        self._preview.show(lambda width: preview_text(scan, plan, now, width=width))
        self._go.disabled = not plan.evict

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._update()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        self._update()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._continue()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "evict-continue":
            self._continue()
        else:
            self.dismiss(None)

    def _continue(self) -> None:
        try:
            options = self.options()
        except FvError as exc:
            self.notify(describe_error(exc), severity="error")
            return
        self.dismiss(options)

    def action_cancel(self) -> None:
        self.dismiss(None)


def confirm_body(plan: EvictionPlan, scan: CacheScan | None, now: float) -> list[str]:
    """The confirmation's lines: what is deleted where, what is skipped and why."""
    body = [f"Delete {plural(len(plan.evict), 'cache entry', 'cache entries')} under", f"  {plan.root}",
            f"freeing {human_bytes(plan.freed_bytes)}:"]
    if plan.free_space is not None:
        body.insert(0, free_space_line(plan).plain.rstrip("\n"))
    body += elided(plan.evict, lambda p: f"  {p.key} {human_bytes(p.bytes):>10}  {one_line(evict_reason_text(p), 58)}",
                   lambda n: f"  … {n} more", 10, 3)
    if plan.force:
        body.append("force: entries that look in use are deleted too.")
    if plan.skipped:
        body.append(f"Left in place ({len(plan.skipped)}):")
        for skipped in list(plan.skipped)[:6]:
            entry = scan.get(skipped.key) if scan is not None else None
            body.append(f"  {skipped.key}  {one_line(skip_text(skipped.why, entry, now, plan.grace_seconds), 69)}")
        if len(plan.skipped) > 6:
            body.append(f"  … {len(plan.skipped) - 6} more")
    body.append("Each entry is re-checked right before deletion; symlinks are never followed.")
    return body

