"""The footer of a run's screen: Textual's Footer, except that a change of which keys apply is made in place.

Textual's Footer answers every change of the bindings by composing itself again (``call_after_refresh(recompose)``):
after the frame that shows a key's effect in the status line, it removes its ~10 keys, mounts new ones (each
styled from the stylesheet), and lays the screen out two or three times. On a run's screen the keys change with
every command (p: Pause becomes Resume; s: Stop becomes Stop now), and that recompose was most of what a key
press cost: measured, p's whole effect (status line and footer) was drawn 30-45 ms after the press on an idle
console, against ~5 ms for the status line alone.

:class:`KeyFooter` compares what the footer would now show with the keys it has: when they are as many, in the
same places (the usual case: one key's label and action swap), it updates those keys where they stand, at once,
so that the footer's change is drawn in the same frame as the status line's, with one layout only when a label's
width changed. Anything else (a key more or less, binding groups) is left to Textual's recompose. What it draws
is what the recompose draws (the snapshot tests are the judge).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

Shown = tuple[str, str, str, str, bool, str, str]  # key, key display, description, action, disabled, tooltip, classes


def action_class(action: str) -> str:
    """The class a footer key is given for its action (app.tcss hides some where the footer is crowded)."""
    return f"-do-{action}" if action.isidentifier() else ""


class KeyFooter(Footer):
    """A Footer that updates its keys in place when only their labels, actions or states changed. Each key has
    a class named after its action (``action_class``): where two more keys must fit (a restart to approve at 80
    columns), the stylesheet leaves out the least needed ones, whose keys still work, rather than the spaces."""

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                # Its classes given before it is mounted, without restyling it (it is styled when mounted): each
                # restyle here, and the one its compact watcher made when mounted for "-compact" (now already
                # there), cost ~0.3 ms of CPU a key, ~15 ms before an attach's first frame (issue 37).
                names = [name] if (name := action_class(widget.action)) else []
                widget.add_class(*names, *(["-compact"] if self.compact else []), update=False)
            yield widget

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if (self._bindings_ready and screen.app.app_focus and self.is_attached and screen is self.screen
                and self._update_in_place()):
            return
        super().bindings_changed(screen)

    def _wanted(self) -> list[Shown] | None:
        """What compose would yield now, key by key (None: binding groups, left to compose)."""
        active = self.screen.active_bindings
        by_action: defaultdict[str, list[tuple[Binding, bool, str]]] = defaultdict(list)
        for _node, binding, enabled, tooltip in active.values():
            if binding.show:
                by_action[binding.action].append((binding, enabled, tooltip))
        out: list[Shown] = []
        for multi in by_action.values():
            binding, enabled, tooltip = multi[0]
            if binding.group is not None:
                return None
            out.append((binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                        not enabled, tooltip, ""))
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            found = active.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _node, binding, enabled, tooltip = found
                out.append((binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                            not enabled, binding.tooltip or binding.description, "-command-palette"))
        return out

    def _update_in_place(self) -> bool:
        wanted = self._wanted()
        keys = list(self.children)
        if wanted is None or len(wanted) != len(keys) or not all(type(k) is FooterKey for k in keys):
            return False
        if any(k.has_class("-command-palette") != bool(w[6]) for k, w in zip(keys, wanted, strict=True)):
            return False
        for footer_key, (key, display, description, action, disabled, tooltip, _classes) in zip(keys, wanted,
                                                                                                 strict=True):
            assert isinstance(footer_key, FooterKey)
            resized = (display, description) != (footer_key.key_display, footer_key.description)
            changed = resized or (key, action, disabled, tooltip) != (
                footer_key.key, footer_key.action, footer_key._disabled, footer_key.tooltip or "")
            if not changed:
                continue
            footer_key.key, footer_key.key_display, footer_key.description = key, display, description
            if footer_key.action != action:
                if old := action_class(footer_key.action):
                    footer_key.remove_class(old)
                if new := action_class(action):
                    footer_key.add_class(new)
            footer_key.action = action
            footer_key._disabled = disabled
            footer_key.set_class(disabled, "-disabled")
            footer_key.tooltip = tooltip or None
            footer_key.refresh(layout=resized)
        return True
