"""The operator console: a Textual app over one job's event stream.

Entry points are in :mod:`console.tui.launch` (``run_console`` for a run in this
process, ``attach_console`` for a run elsewhere or a finished one). The console
renders only from engine events and files (main_plan.md) and acts only through the
engine's control API; it holds no agent logic.

Modules: ``app`` (the App: event intake, key actions), ``state`` (the fold from
events to what is shown; no Textual), ``bridge`` (engine thread -> UI), ``commands``
(supervisor or inbox), ``themes``/``keymap`` (operator configuration),
``widgets/`` (one module per pane), ``screens/`` (main layout and modals).
"""
