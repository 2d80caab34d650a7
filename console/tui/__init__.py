"""The operator console: a Textual app over one job's event stream.

Entry points are in :mod:`console.tui.launch` (``attach_console`` for a run of this
machine, live or finished, ``attach_remote_console`` for another machine's, ``fleet_console``). The console
renders only from engine events and files (main_plan.md) and acts only through the
engine's control API; it holds no agent logic.

Modules: ``app`` (the App: themes, key map, signals, screenshots), ``state`` (the fold from
events to what is shown; no Textual), ``bridge`` (a run's events -> UI), ``commands``
(the job's inbox), ``themes``/``keymap`` (operator configuration),
``widgets/`` (one module per pane), ``screens/`` (main layout and modals).
"""
