"""The footer keeps its spaces at 80 columns (issue 33, point 9): while a restart waits, approve and deny join the
keys; the footer read "⇥Pane cCheckpoint rRewind aApprove dDeny ..." (each key run into its word). Now the least
needed keys (Guards, Max) leave the footer meanwhile, and still work."""

from __future__ import annotations

from itertools import pairwise

from textual.widgets._footer import FooterKey

from console.tui.screens.guardrails import GuardrailsScreen
from console.tui.screens.run import RunScreen
from tests.tui.conftest import drive, wait_for
from tests.tui.test_dialog_keys import Clock, Seq, pending, recorded_app, started


def footer_keys(screen) -> list[FooterKey]:
    return [k for k in screen.query(FooterKey) if k.display and k.region.width]


def test_the_footer_keeps_its_spaces_at_80_columns_while_a_restart_waits(make_job):
    clock = Clock()
    app, _rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.pause()
        before = {k.description for k in footer_keys(app.screen)}
        assert {"Guards", "Max"} <= before
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: app.state.restart_pending is not None, what="the restart pending")
        await wait_for(pilot, lambda: app.screen.shown_at is not None if hasattr(app.screen, "shown_at") else False,
                       what="the approval")
        clock.now += 1
        await pilot.press("escape")  # later: the run's screen, its footer with approve and deny
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run's screen")
        await wait_for(pilot, lambda: "Approve" in {k.description for k in footer_keys(app.screen)},
                       what="approve in the footer")
        await pilot.pause()
        keys = footer_keys(app.screen)
        screen = app.screen.region
        for key in keys:
            text = key.render().plain
            assert text == f"{key.key_display} {key.description}", text  # a space between key and word
            assert screen.contains_region(key.region), (text, key.region)
        ordered = sorted(keys, key=lambda k: k.region.x)
        for left, right in pairwise(ordered):
            assert right.region.x > left.region.right, (left.description, right.description)  # a gap between
        shown = {k.description for k in keys}
        assert {"Approve", "Deny", "Checkpoint", "Rewind", "Pause", "Stop", "Help", "Quit", "Pane"} <= shown
        assert not {"Guards", "Max"} & shown
        await pilot.press("g")  # left out of the footer, not out of reach
        await wait_for(pilot, lambda: isinstance(app.screen, GuardrailsScreen), what="the guardrails")

    drive(app, body, size=(80, 24))


def test_the_footer_keys_are_styled_once_mounted_not_one_by_one_before(make_job, monkeypatch):
    """Each key's classes (its action's, "-compact") are given before it is mounted, without restyling it: a
    restyle per class and per key cost an attach ~15 ms of CPU before its first frame (issue 37). What they
    show is the same (the snapshot tests): every key has its classes once mounted."""
    from textual.dom import DOMNode

    from console.tui.widgets.footer import action_class

    restyled_unmounted: list[str] = []
    real = DOMNode.update_node_styles

    def counting(self, animate=True):  # type: ignore[no-untyped-def]
        if isinstance(self, FooterKey) and not self.is_mounted:
            restyled_unmounted.append(self.action)
        return real(self, animate)

    monkeypatch.setattr(DOMNode, "update_node_styles", counting)
    app, _rec = recorded_app(make_job, Clock())

    async def body(pilot):
        await started(pilot, app, Seq())
        await pilot.pause()
        keys = list(app.screen.query(FooterKey))
        assert keys and all(k.has_class("-compact") for k in keys)
        assert all(k.has_class(action_class(k.action)) for k in keys if action_class(k.action))

    drive(app, body)
    assert restyled_unmounted == []
