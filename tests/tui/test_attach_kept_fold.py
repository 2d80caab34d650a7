"""An attached console on a long run its runner kept the view's fold of (console.view.state.kept): the console's
state is the whole log's fold, though it parsed only the tail after the kept fold, and the conversation shows the
newest messages; a kept fold another operator planted is passed over, and the whole log is folded instead."""

from __future__ import annotations

from console.engine import events as ev
from console.engine.seal import Seal
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from console.tui import follow
from console.view.state import ConsoleState
from console.view.state import kept as kept_mod
from console.view.state.kept import FoldKeeper, fold_lines, path_of
from tests.conftest import run_settings
from tests.provenance_support import launch, operator_seal
from tests.tui.conftest import attach_app, drive, settle, wait_for
from tests.unit.test_kept_fold import comparable


def _run(make_job, clock, monkeypatch):
    monkeypatch.setattr(kept_mod, "KEEP_EVERY", 20_000)
    monkeypatch.setattr(kept_mod, "KEEP_CHECK", 0.0)
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(context_window=6_000, max_restarts=10), ScriptedProvider(clock=clock),
                     clock=clock, launch=launch())
    sup.subscribe(FoldKeeper(paths, operator_seal()), deferred=True, text=False)
    assert sup.run().ok and path_of(paths).exists()
    return paths


def _whole(paths) -> ConsoleState:
    st = ConsoleState(paths.root.name)
    fold_lines(st, paths.events.read_bytes())
    return st


def test_an_attach_from_the_runners_kept_fold_shows_the_whole_fold(make_job, clock, monkeypatch) -> None:
    paths = _run(make_job, clock, monkeypatch)
    data = paths.events.read_bytes()
    # The kept fold as a reader finds it mid-run: the log's last quarter after it.
    offset = data.rfind(b"\n", 0, len(data) * 3 // 4) + 1
    st = ConsoleState()
    fold_lines(st, data[:offset])
    assert kept_mod.keep(paths, operator_seal(), st, kept_mod.blank_of(ConsoleState()), offset, 0, 0)
    monkeypatch.setattr(follow, "QUICK_BYTES", 0)
    app = attach_app(paths)

    async def body(pilot):
        await wait_for(pilot, lambda: app.run_screen.intake.folded_upto > 0, what="the kept fold adopted")
        await settle(pilot, app)
        assert comparable(app.state) == comparable(_whole(paths))
        assert app.state.outcome == "completed"
        last = [e for e in ev.read_events(paths.events) if isinstance(e, ev.AssistantMessage)][-1]
        assert any(last.text.splitlines()[0][:40] in line for line in app.run_screen.conversation.plain_lines())

    drive(app, body)


def test_a_planted_kept_fold_is_passed_over(make_job, clock, monkeypatch, tmp_path) -> None:
    paths = _run(make_job, clock, monkeypatch)
    data = paths.events.read_bytes()
    lying = ConsoleState()
    fold_lines(lying, data)
    lying.outcome, lying.input_tokens = None, 1  # says the run goes on, and used nothing
    assert kept_mod.keep(paths, Seal.of(tmp_path / "someone-else"), lying, kept_mod.blank_of(ConsoleState()),
                         len(data), 0, 0)
    assert path_of(paths).exists()
    monkeypatch.setattr(follow, "QUICK_BYTES", 0)
    monkeypatch.setattr(follow, "DRAW_FIRST", 0)
    app = attach_app(paths)

    async def body(pilot):
        await wait_for(pilot, lambda: app.run_screen.intake.folded_upto > 0, what="the whole log folded")
        await settle(pilot, app)
        assert comparable(app.state) == comparable(_whole(paths))
        assert app.state.outcome == "completed" and app.state.input_tokens > 1

    drive(app, body)
